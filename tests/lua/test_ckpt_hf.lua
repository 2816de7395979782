-- Hugging Face GPT-2 interchange: export_hf writes model.safetensors + config.json that an
-- independent reader (hf_gpt2_reader.py: Python's standard library, written from the
-- safetensors spec and GPT-2's definition) parses; it holds every parameter bit for bit under
-- GPT-2's names and layout (Conv1D weights transposed), and GPT-2's forward pass run by that
-- reader gives our logits. import_hf brings the file back into a fresh model, equal in every
-- value; a file missing a tensor or with a wrong shape is refused on every rank. config.json:
-- bos/eos written; every architecture field checked on import (the mismatch named with both
-- values); import_hf(dir) alone builds the model the file describes.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local common = require("ckpt_common")
local here = arg[0]:match("(.*/)") or "./"
local r = lab.dist.rank()
local dir = common.tmpdir("ckpt-hf")

-- this test's own table of GPT-2's names for lab.nn.GPT's parameters (Conv1D: transposed)
local function gpt2_name(name)
  local top = { ["wte.weight"] = "transformer.wte.weight", ["wpe.weight"] = "transformer.wpe.weight",
    ["ln_f.weight"] = "transformer.ln_f.weight", ["ln_f.bias"] = "transformer.ln_f.bias", ["head.weight"] = "lm_head.weight" }
  if top[name] then return top[name], false end
  local i, mod, rest = name:match("^blocks%.(%d+)%.(%w+)%.(.*)$")
  local sub = { ln1 = "ln_1", ln2 = "ln_2", ["attn.qkv"] = "attn.c_attn", ["attn.proj"] = "attn.c_proj",
    ["mlp.fc"] = "mlp.c_fc", ["mlp.proj"] = "mlp.c_proj" }
  local full = mod .. "." .. rest
  local m2, leaf = full:match("^(.*)%.(%w+)$")
  local hfmod = sub[m2]
  return string.format("transformer.h.%d.%s.%s", tonumber(i) - 1, hfmod, leaf), leaf == "weight" and mod ~= "ln1" and mod ~= "ln2"
end

for _, tied in ipairs({ false, true }) do
  T.test(string.format("export (%s head): an independent reader sees every value and GPT-2's logits", tied and "tied" or "own"), function()
    local cfg = { vocab = 16, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8, tied = tied }
    lab.manual_seed(3)
    local m = lab.nn.GPT(cfg)
    local opt = lab.optim.AdamW(m:parameters(), { lr = 1e-2 })
    local ids = lab.randint(0, 16, { 2, 8 })
    local _, loss = m(ids, ids)
    loss:backward()
    opt:step() -- biases and LayerNorms away from their initial 0 and 1
    local out = dir .. (tied and "/tied" or "/own")
    lab.ckpt.export_hf(out, m)
    local probe = { 3, 1, 4, 1, 5, 9, 2, 6 }
    local logits = lab.no_grad(function() return m(lab.tensor({ probe }, { dtype = "i64" })) end)
    if r == 0 then
      local cmd = string.format("/usr/bin/python3 '%shf_gpt2_reader.py' '%s' %s", here, out, table.concat(probe, " "))
      local p = io.popen(cmd)
      local text = p:read("a")
      p:close()
      local got = lab._ckpt.json_decode(text)
      T.ok(got ~= nil, "the reader's output parses: " .. text:sub(1, 300))
      if got then
        local seen = 0
        for _, np in ipairs(m:named_parameters()) do
          local h, transposed = gpt2_name(np[1])
          local e = got.tensors[h]
          T.ok(e ~= nil, h .. " is in the file")
          if e then
            local want = transposed and np[2]:detach():t():contiguous() or np[2]:detach()
            T.eq(table.concat(e.shape, ","), table.concat(want.shape, ","), h .. " shape")
            T.eq(lab.max_abs_diff(lab.tensor(e.values):view(want.shape), want), 0, h .. " values")
            seen = seen + 1
          end
        end
        local n = 0
        for _ in pairs(got.tensors) do n = n + 1 end
        T.eq(n, seen, "the file holds exactly the model's parameters")
        local worst = 0
        for t = 1, 8 do
          for v = 1, 16 do worst = math.max(worst, math.abs(got.logits[t][v] - logits[1][t][v])) end
        end
        T.ok(worst < 1e-4, "GPT-2's forward on the file gives our logits (max diff " .. worst .. ")")
      end
    end
    -- and back into a fresh model
    lab.manual_seed(4)
    local b = lab.nn.GPT(cfg)
    lab.ckpt.import_hf(out, b)
    for i, p in ipairs(b:parameters()) do T.eq(lab.max_abs_diff(p, m:parameters()[i]), 0, "imported parameter " .. i) end
  end)
end

-- config.json, as the other readers and writers use it
local function read_json(path)
  local text = assert(lab._ckpt.read_file(path, 1 << 20))
  return lab._ckpt.json_decode(text, path), text
end
-- a copy of directory src as dst with config.json's text passed through edit (rank 0 writes)
local function edited(src, dst, edit)
  if r == 0 then
    os.execute(string.format("rm -rf '%s' && mkdir -p '%s' && cp '%s/model.safetensors' '%s/'", dst, dst, src, dst))
    local _, text = read_json(src .. "/config.json")
    common.write(dst .. "/config.json", edit(text))
  end
  lab.dist.barrier()
  return dst
end
local function set_field(text, k, v) -- "k":<anything up to , or }> -> "k":v
  local out, n = text:gsub('"' .. k .. '":[^,}]*', '"' .. k .. '":' .. v)
  assert(n == 1, k .. " is not in the config")
  return out
end

T.test("import refuses a file missing a tensor or of another shape, on every rank", function()
  local cfg = { vocab = 16, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8, tied = false }
  -- config.json edited to agree with each model, so the tensors' own checks are reached
  local function claims(name, field, v)
    return edited(dir .. "/own", dir .. "/" .. name, function(t) return set_field(t, field, v) end)
  end
  local small = lab.nn.GPT { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, tied = false }
  T.raises(function() lab.ckpt.import_hf(claims("one_layer", "n_layer", "1"), small) end, "ckpt.import_hf", "transformer.h.1",
    "does not have")
  local wide = lab.nn.GPT { vocab = 16, d_model = 8, n_layer = 2, n_head = 2, seq_len = 8, tied = false }
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/narrow", function(t)
    return set_field(set_field(t, "n_embd", "8"), "n_inner", "32") end), wide) end, "ckpt.import_hf", "has shape")
  T.raises(function() lab.ckpt.import_hf(dir .. "/none", lab.nn.GPT(cfg)) end, "ckpt.import_hf", "cannot open")
  T.raises(function() lab.ckpt.export_hf(dir .. "/x", lab.randn(2)) end, "ckpt.export_hf", "lab.nn.GPT")
end)

T.test("export writes bos/eos (the last id of the vocabulary), the activation and the epsilon into config.json", function()
  local c = read_json(dir .. "/own/config.json")
  T.eq(c.bos_token_id, 15, "bos_token_id: the last of 16 ids")
  T.eq(c.eos_token_id, 15, "eos_token_id")
  T.eq(c.activation_function, "gelu_new", "the tanh GELU")
  T.eq(c.layer_norm_epsilon, 1e-5, "LayerNorm epsilon")
  T.eq(c.tie_word_embeddings, false, "own head")
  T.eq(read_json(dir .. "/tied/config.json").tie_word_embeddings, true, "tied head")
end)

T.test("import reads config.json and refuses every mismatch, naming the field and both values, on every rank", function()
  local base = { vocab = 16, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8 }
  local function with(extra)
    local c = {}
    for k, v in pairs(base) do c[k] = v end
    for k, v in pairs(extra) do c[k] = v end
    return lab.nn.GPT(c)
  end
  local pre = "rank " .. r .. ": ckpt.import_hf:"
  -- an untied lm_head into a tied GPT (the old import dropped it: logits off)
  T.raises(function() lab.ckpt.import_hf(dir .. "/own", with({})) end, pre, "tie_word_embeddings is false, the model's is true",
    "lm_head")
  T.raises(function() lab.ckpt.import_hf(dir .. "/tied", with({ tied = false })) end, pre,
    "tie_word_embeddings is true, the model's is false")
  -- n_head 4 and 2 share every shape
  T.raises(function() lab.ckpt.import_hf(dir .. "/own", with({ tied = false, n_head = 4 })) end, pre,
    "config.json's n_head is 2, the model's is 4")
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/eps", function(t)
    return set_field(t, "layer_norm_epsilon", "0.001") end), with({ tied = false })) end, pre,
    "layer_norm_epsilon is 0.001, the model's is 1e-05")
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/gelu", function(t)
    return set_field(t, "activation_function", '"gelu"') end), with({ tied = false })) end, pre,
    "activation_function is gelu, the model's is gelu_new")
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/relu", function(t)
    return set_field(t, "activation_function", '"relu"') end), with({ tied = false })) end, pre,
    "activation_function is relu", "gelu_new")
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/scale", function(t)
    return set_field(t, "tie_word_embeddings", 'false,"scale_attn_by_inverse_layer_idx":true') end), with({ tied = false })) end,
    pre, "scale_attn_by_inverse_layer_idx is true, the model's is false")
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/nocfg", function() return "[1]" end), with({ tied = false })) end,
    pre, "not a JSON object")
  -- a tied config whose file still holds an lm_head apart from the embedding
  T.raises(function() lab.ckpt.import_hf(edited(dir .. "/own", dir .. "/liar", function(t)
    return set_field(t, "tie_word_embeddings", "true") end), with({})) end, pre, "lm_head.weight apart from transformer.wte.weight")
  -- transformers' tanh aliases are the same model
  local alias = edited(dir .. "/own", dir .. "/alias", function(t) return set_field(t, "activation_function", '"gelu_pytorch_tanh"') end)
  lab.ckpt.import_hf(alias, with({ tied = false }))
end)

T.test("import_hf(dir) builds the GPT config.json describes, equal in every value and in its logits", function()
  for _, which in ipairs({ "own", "tied" }) do
    local cfg = { vocab = 16, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8, tied = which == "tied" }
    lab.manual_seed(3)
    local ref = lab.nn.GPT(cfg)
    lab.ckpt.import_hf(dir .. "/" .. which, ref)
    local state = lab.get_rng_state()
    local m = lab.ckpt.import_hf(dir .. "/" .. which)
    local after = lab.rand(4)
    lab.set_rng_state(state)
    T.eq(lab.max_abs_diff(lab.rand(4), after), 0, "the caller's random stream is untouched")
    T.eq(m.cfg.tied ~= false, which == "tied", which .. ": the head as the file has it")
    local rp, mp = ref:named_parameters(), m:named_parameters()
    T.eq(#mp, #rp, which .. ": as many parameters")
    for i = 1, #rp do
      T.eq(mp[i][1], rp[i][1])
      T.eq(lab.max_abs_diff(mp[i][2], rp[i][2]), 0, which .. " " .. rp[i][1])
    end
  end
  -- a GPT with LayerNorm epsilon 1e-3 and the exact GELU: exported, rebuilt from the file alone, same logits
  lab.manual_seed(6)
  local odd = lab.nn.GPT({ vocab = 16, d_model = 16, n_layer = 1, n_head = 4, seq_len = 8, tied = false })
  local function visit(mod)
    if getmetatable(mod) == lab.nn.LayerNorm then mod.eps = 1e-3 end
    if getmetatable(mod) == lab.nn.GELU then mod.approximate = "none" end
    for _, ch in ipairs(mod:children()) do visit(ch) end
  end
  visit(odd)
  lab.ckpt.export_hf(dir .. "/odd", odd)
  local c = read_json(dir .. "/odd/config.json")
  T.eq(c.activation_function, "gelu", "the exact GELU exported as gelu")
  T.eq(c.layer_norm_epsilon, 1e-3, "epsilon exported")
  local back = lab.ckpt.import_hf(dir .. "/odd")
  T.eq(back.cfg.n_head, 4, "n_head from the file")
  T.eq(back.ln_f.eps, 1e-3, "epsilon from the file")
  T.eq(back.blocks:at(1).mlp.act.approximate, "none", "exact GELU from the file")
  local ids = lab.tensor({ { 3, 1, 4, 1, 5, 9, 2, 6 } }, { dtype = "i64" })
  local a, b = lab.no_grad(function() return odd(ids), back(ids) end)
  T.eq(lab.max_abs_diff(a, b), 0, "the rebuilt model's logits")
  T.raises(function() lab.ckpt.import_hf(dir .. "/odd", lab.nn.GPT({ vocab = 16, d_model = 16, n_layer = 1, n_head = 4,
    seq_len = 8, tied = false })) end, "activation_function is gelu, the model's is gelu_new",
    "layer_norm_epsilon is 0.001, the model's is 1e-05")
end)

common.remove(dir)
T.finish()
