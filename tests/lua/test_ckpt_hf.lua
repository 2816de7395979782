-- Hugging Face GPT-2 interchange: export_hf writes model.safetensors + config.json that an
-- independent reader (hf_gpt2_reader.py: Python's standard library, written from the
-- safetensors spec and GPT-2's definition) parses; it holds every parameter bit for bit under
-- GPT-2's names and layout (Conv1D weights transposed), and GPT-2's forward pass run by that
-- reader gives our logits. import_hf brings the file back into a fresh model, equal in every
-- value; a file missing a tensor or with a wrong shape is refused on every rank.
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

T.test("import refuses a file missing a tensor or of another shape, on every rank", function()
  local cfg = { vocab = 16, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8, tied = false }
  local small = lab.nn.GPT { vocab = 16, d_model = 16, n_layer = 1, n_head = 2, seq_len = 8, tied = false }
  T.raises(function() lab.ckpt.import_hf(dir .. "/own", small) end, "ckpt.import_hf", "transformer.h.1", "does not have")
  local wide = lab.nn.GPT { vocab = 16, d_model = 8, n_layer = 2, n_head = 2, seq_len = 8, tied = false }
  T.raises(function() lab.ckpt.import_hf(dir .. "/own", wide) end, "ckpt.import_hf", "has shape")
  local tied_model = lab.nn.GPT { vocab = 16, d_model = 16, n_layer = 2, n_head = 2, seq_len = 8 }
  lab.ckpt.import_hf(dir .. "/own", tied_model) -- an untied file's lm_head is not needed
  T.raises(function() lab.ckpt.import_hf(dir .. "/none", lab.nn.GPT(cfg)) end, "ckpt.import_hf", "cannot open")
  T.raises(function() lab.ckpt.export_hf(dir .. "/x", lab.randn(2)) end, "ckpt.export_hf", "lab.nn.GPT")
end)

common.remove(dir)
T.finish()
