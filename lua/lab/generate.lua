-- Sampling from a language model: model:generate(ids, {max_new_tokens=, temperature=, top_k=,
-- greedy=}) for lab.nn.GPT and lab.tp.GPT (and lab.generate(model, ids, opts) for any module
-- whose forward maps ids [B, T] to logits [B, T, V]).
--
--   local out = model:generate(prompt, {max_new_tokens = 20, temperature = 0.8, top_k = 40})
--
-- One token per step for every row of the batch: the model reads the last seq_len tokens
-- (no KV cache: each step runs the whole context again, which is what a reader can follow;
-- generation is a small share of the labs' time), the last position's logits are divided by
-- the temperature, all but the top_k largest are set to -inf (ties with the k-th are kept,
-- as Hugging Face's top-k filter does), and a token is drawn from the softmax. The draw uses
-- the Gumbel-max trick: argmax(z + g) with g = -log(-log(u)), u uniform, is distributed as
-- softmax(z), so a sample is one vectorised argmax and the uniforms come from the lab's
-- Philox generator: lab.manual_seed(s) reproduces a sample exactly, on any thread count.
-- As the temperature goes to 0, z / T dwarfs the (bounded) noise and sampling becomes the
-- greedy argmax. The model's mode is the caller's (call model:eval() to turn dropout off).
local errors = require("lab.errors")
local nn = lab.nn

local function fail(fmt, ...)
  error(string.format("rank %d: generate: " .. fmt, lab.dist.rank(), ...), 0)
end

local KNOWN = { max_new_tokens = true, temperature = true, top_k = true, greedy = true }

-- the options, checked; V is the vocabulary (nil when the model does not say)
local function check_opts(opts, V)
  if type(opts) ~= "table" then
    fail("options must be a table {max_new_tokens=, temperature=, top_k=, greedy=}, got %s", type(opts))
  end
  for k in pairs(opts) do
    if not KNOWN[k] then
      fail("unknown option %s (known: max_new_tokens, temperature, top_k, greedy)", tostring(k))
    end
  end
  local n = opts.max_new_tokens
  if math.type(n) ~= "integer" or n < 0 then
    fail("max_new_tokens must be an integer >= 0, got %s", tostring(n))
  end
  if opts.greedy ~= nil and type(opts.greedy) ~= "boolean" then
    fail("greedy must be true or false, got %s", tostring(opts.greedy))
  end
  if opts.greedy and (opts.temperature ~= nil or opts.top_k ~= nil) then
    fail("greedy=true takes the argmax: temperature (%s) and top_k (%s) would be ignored; drop them",
      tostring(opts.temperature), tostring(opts.top_k))
  end
  local temp = opts.temperature or 1
  if type(temp) ~= "number" or not (temp > 0) or temp == math.huge then
    fail("temperature must be a finite number > 0 (greedy=true for the argmax), got %s", tostring(temp))
  end
  local k = opts.top_k
  if k ~= nil and (math.type(k) ~= "integer" or k < 1 or (V and k > V)) then
    fail("top_k must be an integer in [1, %s], got %s", V and tostring(V) or "vocab", tostring(k))
  end
  return n, temp, k, opts.greedy == true
end

local function check_ids(ids, V)
  if not lab.is_tensor(ids) then fail("ids must be a tensor of token ids [B, T], got %s", type(ids)) end
  if ids.ndim ~= 2 or ids.shape[1] < 1 or ids.shape[2] < 1 then
    fail("ids must be [B, T] with B, T >= 1, got shape [%s]", table.concat(ids.shape, ","))
  end
  if ids.dtype ~= "i64" and ids.dtype ~= "i32" then fail("ids must be integer token ids (i64 or i32), got %s", ids.dtype) end
  if V then
    local lo, hi = ids:min():item(), ids:max():item()
    if lo < 0 or hi >= V then fail("token ids must lie in [0, %d) (the vocabulary), got ids from %d to %d", V, lo, hi) end
  end
end

-- z [B, V]: every entry below its row's k-th largest becomes -inf
local function top_k_filter(z, k)
  local rows, thr = z:tolist(), {}
  for b, row in ipairs(rows) do
    table.sort(row, function(x, y) return x > y end)
    thr[b] = { row[k] }
  end
  local t = lab.tensor(thr, { dtype = z.dtype, device = z.device })
  return z:where(z:ge(t), -math.huge)
end

-- the last position's logits over the whole vocabulary [B, V]; a tensor-parallel GPT holds
-- V / p of them per rank and gathers them from its group
local function last_logits(model, tp_group, ctx)
  local logits = model(ctx)
  local last = logits:select(2, ctx.shape[2]):contiguous()
  if tp_group then last = lab.cat(lab.dist.all_gather(last, { group = tp_group }), 2) end
  if last.dtype == "bf16" or last.dtype == "f16" then last = last:float() end
  return last
end

-- model(ids) -> logits; returns ids [B, T + max_new_tokens] (i64), the prompt then the samples
local function generate(model, ids, opts)
  errors.arg(type(model) == "table", "generate", 1, "a model (module or wrapper)", model)
  local inner = model.module or model -- through a DDP wrapper
  local cfg = inner.cfg
  local V = cfg and cfg.vocab
  local tp_group = lab.tp and getmetatable(inner) == lab.tp.GPT and inner.group or nil
  local n, temp, k, greedy = check_opts(opts or {}, V)
  check_ids(ids, V)
  local window = cfg and cfg.seq_len or math.huge
  return lab.no_grad(function()
    local out = ids:to("i64")
    local B = out.shape[1]
    for _ = 1, n do
      local T = out.shape[2]
      local ctx = T > window and out:narrow(2, T - window + 1, window) or out
      local last = last_logits(model, tp_group, ctx)
      local nxt
      if greedy then
        nxt = last:argmax(-1)
      else
        local z = last / temp
        if k and k < last.shape[2] then z = top_k_filter(z, k) end
        -- Gumbel noise; u kept off 0 so log(u) is finite (u = 0 has probability 2^-24)
        local u = lab.rand(z.shape, { dtype = z.dtype, device = z.device }):clamp(1e-30, 1)
        nxt = (z - (-u:log()):log()):argmax(-1)
      end
      if tp_group then
        -- the ranks of a TP group hold one model: they continue with its first rank's token
        lab.dist.broadcast(nxt, 0, { group = tp_group })
      end
      out = lab.cat({ out, (nxt - 1):view(B, 1) }, 2) -- argmax counts from 1, token ids from 0
    end
    return out
  end)
end

nn.GPT.generate = generate
if lab.tp then lab.tp.GPT.generate = generate end

return generate
