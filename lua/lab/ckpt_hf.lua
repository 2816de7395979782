-- A GPT's weights under Hugging Face GPT-2 names and layout, so they move between llmlab and
-- the transformers / PyTorch world:
--   lab.ckpt.export_hf("out/gpt", model)   -- out/gpt/model.safetensors + config.json (rank 0 writes)
--   lab.ckpt.import_hf("out/gpt", model)   -- every rank reads; all load or all raise
-- Names: wte/wpe/ln_f under "transformer.", blocks.<i> (1-based) as transformer.h.<i-1>,
-- ln1/ln2 as ln_1/ln_2, attn.qkv as attn.c_attn, attn.proj as attn.c_proj, mlp.fc as
-- mlp.c_fc, mlp.proj as mlp.c_proj, an untied head as lm_head. GPT-2's Conv1D keeps its weight
-- as [in, out], the transpose of a Linear's [out, in]: those four weights are transposed.
-- The model is a plain lab.nn.GPT (a sharded run loads its checkpoint into one first:
-- lab.ckpt.load reshards).
local hf = {}
local C = lab._ckpt
local fmt = require("lab.ckpt_format")

local BLOCK = {
  ["ln1.weight"] = { "ln_1.weight" }, ["ln1.bias"] = { "ln_1.bias" },
  ["ln2.weight"] = { "ln_2.weight" }, ["ln2.bias"] = { "ln_2.bias" },
  ["attn.qkv.weight"] = { "attn.c_attn.weight", true }, ["attn.qkv.bias"] = { "attn.c_attn.bias" },
  ["attn.proj.weight"] = { "attn.c_proj.weight", true }, ["attn.proj.bias"] = { "attn.c_proj.bias" },
  ["mlp.fc.weight"] = { "mlp.c_fc.weight", true }, ["mlp.fc.bias"] = { "mlp.c_fc.bias" },
  ["mlp.proj.weight"] = { "mlp.c_proj.weight", true }, ["mlp.proj.bias"] = { "mlp.c_proj.bias" },
}
local TOP = {
  ["wte.weight"] = "transformer.wte.weight", ["wpe.weight"] = "transformer.wpe.weight",
  ["ln_f.weight"] = "transformer.ln_f.weight", ["ln_f.bias"] = "transformer.ln_f.bias", ["head.weight"] = "lm_head.weight",
}

-- our name -> HF name and whether the weight is transposed (nil: no HF counterpart)
local function hf_name(name)
  if TOP[name] then return TOP[name], false end
  local i, rest = name:match("^blocks%.(%d+)%.(.+)$")
  local b = i and BLOCK[rest]
  if b then return string.format("transformer.h.%d.%s", tonumber(i) - 1, b[1]), b[2] == true end
end

local function gpt_of(op, model)
  local m = model
  if type(m) == "table" and not lab.nn.is_module(m) and lab.nn.is_module(m.module) then m = m.module end
  if not lab.nn.is_module(m) or type(m.cfg) ~= "table" or not m.blocks or not m.wte then
    error(string.format("rank %d: %s: model must be a lab.nn.GPT (load a sharded checkpoint into one first)",
      lab.dist.rank(), op), 0)
  end
  return m
end

-- the (name, tensor) pairs of the model: HF name -> {tensor, transposed, our name}
local function mapping(op, m)
  local out = {}
  for _, np in ipairs(m:named_parameters()) do
    local name, t = np[1], np[2]
    local h, tr = hf_name(name)
    if not h then
      error(string.format("rank %d: %s: %s has no GPT-2 counterpart (MoE and LoRA layers do not export)",
        lab.dist.rank(), op, name), 0)
    end
    out[h] = { tensor = t, transposed = tr, name = name }
  end
  return out
end

function hf.export_hf(dir, model)
  if type(dir) ~= "string" or dir == "" then
    error(string.format("rank %d: ckpt.export_hf: the first argument is a directory, got %s", lab.dist.rank(), type(dir)), 0)
  end
  local m = gpt_of("ckpt.export_hf", model)
  local map = mapping("ckpt.export_hf", m)
  local cfg = m.cfg
  local problem
  if lab.dist.rank() == 0 then
    local ok, err = pcall(function()
      local names = {}
      for h in pairs(map) do names[#names + 1] = h end
      table.sort(names)
      local list = {}
      for _, h in ipairs(names) do
        local e = map[h]
        local t = e.tensor:detach()
        list[#list + 1] = { h, e.transposed and t:t():contiguous() or t:contiguous() }
      end
      local config = fmt.encode({
        architectures = { "GPT2LMHeadModel" }, model_type = "gpt2", vocab_size = cfg.vocab,
        n_positions = cfg.seq_len, n_ctx = cfg.seq_len, n_embd = cfg.d_model, n_layer = cfg.n_layer,
        n_head = cfg.n_head, n_inner = cfg.d_ff or 4 * cfg.d_model, activation_function = "gelu_new",
        layer_norm_epsilon = m.ln_f.eps or 1e-5, tie_word_embeddings = cfg.tied ~= false,
        resid_pdrop = 0.0, embd_pdrop = 0.0, attn_pdrop = 0.0, torch_dtype = m.wte.weight.dtype == "f32" and "float32"
          or m.wte.weight.dtype == "bf16" and "bfloat16" or m.wte.weight.dtype == "f16" and "float16" or "float64",
      }, "config")
      fmt.mkdir_p(dir)
      C.write({ { path = dir .. "/model.safetensors", tensors = list, metadata = { format = "pt" } },
        { path = dir .. "/config.json", bytes = config } }, false)
    end)
    if not ok then problem = tostring(err) end
  end
  local flag = lab.tensor({ problem and 1 or 0 }, { dtype = "i32" })
  lab.dist.broadcast(flag, 0)
  if flag[1] ~= 0 then
    error(string.format("rank %d: ckpt.export_hf: %s", lab.dist.rank(),
      problem and problem:gsub("^rank %d+: ", "") or "rank 0 could not write " .. dir), 0)
  end
end

-- buffers older transformers versions save in GPT-2 files (the causal mask), not weights
local IGNORED = { "%.attn%.bias$", "%.attn%.masked_bias$" }

function hf.import_hf(dir, model)
  if type(dir) ~= "string" or dir == "" then
    error(string.format("rank %d: ckpt.import_hf: the first argument is a directory, got %s", lab.dist.rank(), type(dir)), 0)
  end
  local m = gpt_of("ckpt.import_hf", model)
  local map = mapping("ckpt.import_hf", m)
  local values = {}
  local ok, err = pcall(function()
    local p = dir .. "/model.safetensors"
    local f, ferr = C.read_safetensors(p)
    if not f then error(ferr, 0) end
    local used = {}
    for h, e in pairs(map) do
      local key = h
      if not f.tensors[key] and h:match("^transformer%.") then key = h:sub(#"transformer." + 1) end -- GPT2Model files
      if not f.tensors[key] and h == "lm_head.weight" then key = f.tensors["transformer.wte.weight"] and
        "transformer.wte.weight" or "wte.weight" end -- a tied file: the head is the embedding
      local t = f.tensors[key]
      if not t then error(string.format("%s lacks %s (for %s)", p, h, e.name), 0) end
      used[key] = true
      if e.transposed then t = t:t() end
      local want = e.tensor.shape
      if table.concat(t.shape, ",") ~= table.concat(want, ",") then
        error(string.format("%s: %s has shape [%s]%s; the model's %s is [%s]", p, key, table.concat(t.shape, ", "),
          e.transposed and " transposed" or "", e.name, table.concat(want, ", ")), 0)
      end
      values[#values + 1] = { e.tensor, t:to(e.tensor.dtype) }
    end
    for key in pairs(f.tensors) do
      local skip = used[key] or key == "lm_head.weight"
      for _, pat in ipairs(IGNORED) do skip = skip or key:match(pat) ~= nil end
      if not skip then error(string.format("%s holds %s, which a GPT-2 of this shape does not have", p, key), 0) end
    end
  end)
  -- every rank read the file; all load or all raise
  local bad = lab.tensor({ ok and 0 or 1 }, { dtype = "i32" })
  lab.dist.all_reduce(bad)
  if bad[1] > 0 then
    error(string.format("rank %d: ckpt.import_hf: %s", lab.dist.rank(), ok and
      string.format("%d rank(s) could not read %s", bad[1], dir) or tostring(err):gsub("^rank %d+: ", "")), 0)
  end
  lab.no_grad(function()
    for _, v in ipairs(values) do v[1]:copy_(v[2]) end
  end)
end

return hf
