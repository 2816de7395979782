-- The GPT training loop shared by scripts/train_gpt.lua and the tests: AdamW with warmup
-- and cosine decay, gradient clipping, a progress line (in place on a terminal, plain lines
-- otherwise), and an optional metrics file of JSON lines.
local errors = require("lab.errors")
local sorted_keys = require("lab.sorted_keys")
local train = {}

local function json_line(t)
  local keys = sorted_keys(t)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    local s = type(v) == "number" and (v == math.floor(v) and math.abs(v) < 2 ^ 53 and string.format("%d", v) or string.format("%.6g", v))
      or string.format("%q", tostring(v))
    parts[#parts + 1] = string.format("%q: %s", k, s)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- A duration as the progress line shows it: "42s", "2m05s", "1h03m". The parts are whole
-- seconds (integers): string.format's %d refuses a float such as 125.3 // 60 == 2.0.
function train.fmt_time(s)
  errors.arg(type(s) == "number", "lab.train.fmt_time", 1, "a number of seconds", s)
  if s ~= s or s == math.huge or s == -math.huge then return "?" end
  if s >= 2 ^ 53 then return string.format("%.3gh", s / 3600) end -- (beyond an integer's floor)
  s = math.floor(math.max(s, 0) + 0.5)
  if s >= 3600 then return string.format("%dh%02dm", s // 3600, s % 3600 // 60) end
  if s >= 60 then return string.format("%dm%02ds", s // 60, s % 60) end
  return string.format("%ds", s)
end

-- The progress line after `step` (0-based) of `steps`, `elapsed` seconds since the start;
-- the ETA assumes the remaining steps take as long as the average so far.
function train.progress_line(step, steps, loss, lr, tokens_per_s, elapsed)
  local args = { step, steps, loss, lr, tokens_per_s, elapsed }
  for i = 1, 6 do errors.type("lab.train.progress_line", i, args[i], "number") end
  local eta = (steps - step - 1) * elapsed / (step + 1)
  return string.format("step %5d/%d  loss %.4f  lr %.2e  %8.0f tok/s  ETA %s", step + 1, steps, loss, lr,
    tokens_per_s, train.fmt_time(eta))
end

-- opts: model, batch (function() -> ids, targets), steps, lr, min_lr, warmup, clip,
-- weight_decay, log_every, metrics (path), quiet, on_step(step, loss),
-- eval (function() -> the loss on held-out data, run under no_grad in eval mode) every
-- eval_every steps (default: a tenth of the run) and after the last, sparkline (true: the
-- recent losses as ▁▂▃▅▇ in the progress line). Returns {loss, tokens_per_s, time, losses =
-- {per step}, evals = {{step=, loss=}}} (steps counted from 1).
function train.run(opts)
  errors.type("lab.train.run", 1, opts, "table", "an options table {model=, batch=, steps=, ...}")
  errors.arg(lab.nn.is_module(opts.model) or lab.ddp.is_wrapper(opts.model), "lab.train.run", 1,
    "opts.model: a lab.nn module or a lab.ddp.wrap wrapper", opts.model)
  local model, steps = opts.model, opts.steps
  local params = model:parameters()
  local opt = lab.optim.AdamW(params, { lr = opts.lr or 3e-4, weight_decay = opts.weight_decay or 0.1, betas = { 0.9, 0.95 } })
  local metrics, merr
  if opts.metrics then
    metrics, merr = io.open(opts.metrics, "w")
    if not metrics then errors.raise("lab.train.run", "cannot write the metrics file: %s", tostring(merr)) end
  end
  local in_place = lab.isatty(1) and lab.dist.world() == 1 and not opts.quiet
  local rank0 = lab.dist.rank() == 0
  local t_start, tokens = lab.clock(), 0
  local last_loss
  local losses, evals = {}, {}
  local eval_every = opts.eval_every or math.max(1, steps // 10)
  errors.arg(opts.eval == nil or type(opts.eval) == "function", "lab.train.run", 1, "eval: a function or nil", opts.eval)
  errors.arg(math.type(eval_every) == "integer" and eval_every >= 1, "lab.train.run", 1, "eval_every: a positive integer", eval_every)
  model:train()
  for step = 0, steps - 1 do
    local t0 = lab.clock()
    local lr = lab.optim.warmup_cosine(step, { lr = opts.lr or 3e-4, min_lr = opts.min_lr or (opts.lr or 3e-4) / 10,
      warmup = opts.warmup or 0, max_steps = steps })
    opt.lr = lr
    local ids, tg = opts.batch()
    local _, loss = model(ids, tg)
    opt:zero_grad()
    loss:backward()
    local gnorm = opts.clip and lab.optim.clip_grad_norm(params, opts.clip) or nil
    opt:step()
    last_loss = loss:item()
    losses[step + 1] = last_loss
    if opts.eval and ((step + 1) % eval_every == 0 or step == steps - 1) then
      model:eval()
      local ev = lab.no_grad(opts.eval)
      model:train()
      evals[#evals + 1] = { step = step + 1, loss = ev }
    end
    local dt = lab.clock() - t0
    tokens = tokens + ids:numel()
    local elapsed = lab.clock() - t_start
    local tps = tokens / elapsed
    if opts.on_step then opts.on_step(step, last_loss) end
    if metrics then
      local ev = evals[#evals]
      metrics:write(json_line({ step = step, loss = last_loss, lr = lr, tokens_per_s = ids:numel() / dt,
        grad_norm = gnorm, time = elapsed, eval_loss = ev and ev.step == step + 1 and ev.loss or nil }), "\n")
    end
    local every = opts.log_every or 10
    if rank0 and not opts.quiet and (step % every == 0 or step == steps - 1 or in_place) then
      local line = train.progress_line(step, steps, last_loss, lr, tps, elapsed)
      if opts.sparkline then line = line .. "  " .. lab.plot.sparkline(losses, 16) end
      if #evals > 0 then line = line .. string.format("  eval %.4f", evals[#evals].loss) end
      if in_place then
        -- a line longer than the terminal wraps, and \r would then rewrite only its last part
        local cols = lab.tty_columns(1)
        if cols and utf8.len(line) > cols - 4 then line = line:sub(1, utf8.offset(line, cols - 3) - 1) end
        io.write("\r", line, "   ")
        if step == steps - 1 then io.write("\n") end
        io.flush()
      else
        print(line)
      end
    end
  end
  if metrics then metrics:close() end
  return { loss = last_loss, tokens_per_s = tokens / (lab.clock() - t_start), time = lab.clock() - t_start,
    losses = losses, evals = evals }
end

return train
