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
-- config.json is part of the model: import_hf reads it and refuses a file whose
-- architecture differs from the model's in any field (sizes, heads, tied head, epsilon,
-- activation, attention scaling), naming the field and both values, since equal tensor
-- shapes do not make equal models (n_head 5 and 4 share every shape). import_hf(dir) with no
-- model builds the lab.nn.GPT the file describes.
local sorted_keys = require("lab.sorted_keys")
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

-- GPT-2's activation names: the tanh approximation under three names, the exact erf form
local ACTIVATIONS = { gelu_new = "tanh", gelu_pytorch_tanh = "tanh", gelu_fast = "tanh", gelu = "none" }
local ACTIVATION_NAME = { tanh = "gelu_new", none = "gelu" }

-- the model's architecture as config.json's fields
local function model_config(m)
  local cfg = m.cfg
  local act = m.blocks:at(1).mlp.act
  return {
    model_type = "gpt2", vocab_size = cfg.vocab, n_positions = cfg.seq_len, n_embd = cfg.d_model,
    n_layer = cfg.n_layer, n_head = cfg.n_head, n_inner = cfg.d_ff or 4 * cfg.d_model,
    activation_function = ACTIVATION_NAME[act and act.approximate or "tanh"] or tostring(act.approximate),
    layer_norm_epsilon = m.ln_f.eps or 1e-5, tie_word_embeddings = cfg.tied ~= false,
    scale_attn_weights = true, scale_attn_by_inverse_layer_idx = false, add_cross_attention = false,
  }
end

-- transformers' GPT2Config defaults: a field config.json leaves out has this value
local DEFAULTS = {
  model_type = "gpt2", vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12,
  activation_function = "gelu_new", layer_norm_epsilon = 1e-5, tie_word_embeddings = true,
  scale_attn_weights = true, scale_attn_by_inverse_layer_idx = false, add_cross_attention = false,
}
local FIELDS = { "model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
  "activation_function", "layer_norm_epsilon", "tie_word_embeddings", "scale_attn_weights",
  "scale_attn_by_inverse_layer_idx", "add_cross_attention" }
local COUNTS = { vocab_size = true, n_positions = true, n_embd = true, n_layer = true, n_head = true, n_inner = true }

-- config.json of dir, every field the architecture needs, defaults filled in; raises
-- naming the file and the field when one is of the wrong kind or describes what lab.nn.GPT
-- cannot be
local function read_config(dir)
  local p = dir .. "/config.json"
  local text, err = C.read_file(p, 1 << 24)
  if not text then error(err, 0) end
  local raw, jerr = C.json_decode(text, p)
  if raw == nil then error(jerr, 0) end
  if type(raw) ~= "table" or raw[1] ~= nil then error(string.format("%s is not a JSON object", p), 0) end
  local c = {}
  for _, k in ipairs(FIELDS) do
    local v = raw[k]
    if v == nil or type(v) == "userdata" then v = DEFAULTS[k] end -- absent or null
    if k == "n_inner" and v == nil then v = 4 * c.n_embd end     -- null: 4 x n_embd
    if COUNTS[k] then
      local i = math.type(v) == "float" and math.tointeger(v) or v
      if math.type(i) ~= "integer" or i < 1 then error(string.format("%s: %s is %s, not a positive integer", p, k, tostring(v)), 0) end
      v = i
    end
    c[k] = v
  end
  if type(c.layer_norm_epsilon) ~= "number" or c.layer_norm_epsilon <= 0 then
    error(string.format("%s: layer_norm_epsilon is %s, not a positive number", p, tostring(c.layer_norm_epsilon)), 0)
  end
  if not ACTIVATIONS[c.activation_function] then
    error(string.format("%s: activation_function is %s; lab.nn.GPT computes gelu_new (gelu_pytorch_tanh, gelu_fast) or gelu",
      p, tostring(c.activation_function)), 0)
  end
  return c, p
end

local function same(a, b)
  if type(a) == "number" and type(b) == "number" then
    return a == b or math.abs(a - b) <= 1e-12 * math.max(math.abs(a), math.abs(b))
  end
  if type(a) == "string" and type(b) == "string" and ACTIVATIONS[a] and ACTIVATIONS[b] then
    return ACTIVATIONS[a] == ACTIVATIONS[b]
  end
  return a == b
end

-- raises naming every field of config c (read from p) that differs from model m's
local function check_config(c, p, m)
  local want, diffs = model_config(m), {}
  for _, k in ipairs(FIELDS) do
    if not same(c[k], want[k]) then
      local hint = ""
      if k == "tie_word_embeddings" then
        hint = want[k] and " (the file has its own lm_head, which a tied GPT would drop)" or ""
      end
      diffs[#diffs + 1] = string.format("%s is %s, the model's is %s%s", k, tostring(c[k]), tostring(want[k]), hint)
    end
  end
  if #diffs > 0 then
    error(string.format("%s's %s; build the model to match, or let import_hf(dir) build it from the file", p,
      table.concat(diffs, "; ")), 0)
  end
end

-- the lab.nn.GPT config.json describes (its LayerNorms' epsilon and its GELU set from the
-- file); the caller's random stream is left as it was
local function build(c)
  local state = lab.get_rng_state()
  local m = lab.nn.GPT({ vocab = c.vocab_size, d_model = c.n_embd, n_layer = c.n_layer, n_head = c.n_head,
    seq_len = c.n_positions, d_ff = c.n_inner, tied = c.tie_word_embeddings })
  lab.set_rng_state(state)
  local function visit(mod)
    if getmetatable(mod) == lab.nn.LayerNorm then mod.eps = c.layer_norm_epsilon end
    if getmetatable(mod) == lab.nn.GELU then mod.approximate = ACTIVATIONS[c.activation_function] end
    for _, ch in ipairs(mod:children()) do visit(ch) end
  end
  visit(m)
  return m
end

-- every rank ran fn; all go on or all raise (the first line of this rank's error, or how
-- many ranks failed)
local function agree(ok, err, what)
  local bad = lab.tensor({ ok and 0 or 1 }, { dtype = "i32" })
  lab.dist.all_reduce(bad)
  if bad[1] > 0 then
    error(string.format("rank %d: ckpt.import_hf: %s", lab.dist.rank(), ok and
      string.format("%d rank(s) could not read %s", bad[1], what) or tostring(err):gsub("^rank %d+: ", "")), 0)
  end
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
      local names = sorted_keys(map)
      local list = {}
      for _, h in ipairs(names) do
        local e = map[h]
        local t = e.tensor:detach()
        list[#list + 1] = { h, e.transposed and t:t():contiguous() or t:contiguous() }
      end
      local arch = model_config(m)
      -- bos/eos: the last id of the vocabulary, as GPT-2's 50256 of 50257 (transformers
      -- warns at generation when they are missing)
      local config = fmt.encode({
        architectures = { "GPT2LMHeadModel" }, model_type = "gpt2", vocab_size = cfg.vocab,
        n_positions = cfg.seq_len, n_ctx = cfg.seq_len, n_embd = cfg.d_model, n_layer = cfg.n_layer,
        n_head = cfg.n_head, n_inner = arch.n_inner, activation_function = arch.activation_function,
        layer_norm_epsilon = arch.layer_norm_epsilon, tie_word_embeddings = arch.tie_word_embeddings,
        bos_token_id = cfg.vocab - 1, eos_token_id = cfg.vocab - 1,
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

-- import_hf(dir, model): the file's weights into model (every rank reads; all load or all
-- raise); import_hf(dir): a new lab.nn.GPT built from config.json, loaded. Returns the model.
function hf.import_hf(dir, model)
  if type(dir) ~= "string" or dir == "" then
    error(string.format("rank %d: ckpt.import_hf: the first argument is a directory, got %s", lab.dist.rank(), type(dir)), 0)
  end
  local m = model ~= nil and gpt_of("ckpt.import_hf", model) or nil
  local config
  local cok, cerr = pcall(function()
    local c, p = read_config(dir)
    if m then check_config(c, p, m) end
    config = c
  end)
  agree(cok, cerr, dir .. "/config.json")
  m = m or build(config)
  local map = mapping("ckpt.import_hf", m)
  local values = {}
  local tied = m.cfg.tied ~= false
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
    -- a tied GPT's head is its embedding: an lm_head.weight in the file must be that same
    -- matrix (some writers store both), or loading would silently drop it
    local head = f.tensors["lm_head.weight"]
    if tied and head and not used["lm_head.weight"] then
      local wte = f.tensors["transformer.wte.weight"] or f.tensors["wte.weight"]
      if not wte or table.concat(head.shape, ",") ~= table.concat(wte.shape, ",") or lab.max_abs_diff(head, wte) ~= 0 then
        error(string.format("%s holds an lm_head.weight apart from transformer.wte.weight, which the model's tied head "
          .. "would drop: build the model with tied = false", p), 0)
      end
    end
    for key in pairs(f.tensors) do
      local skip = used[key] or key == "lm_head.weight"
      for _, pat in ipairs(IGNORED) do skip = skip or key:match(pat) ~= nil end
      if not skip then error(string.format("%s holds %s, which a GPT-2 of this shape does not have", p, key), 0) end
    end
  end)
  agree(ok, err, dir) -- every rank read the file; all load or all raise
  lab.no_grad(function()
    for _, v in ipairs(values) do v[1]:copy_(v[2]) end
  end)
  return m
end

return hf
