-- Trains a small GPT and shows it learning.
--   scripts/llmlab scripts/train_gpt.lua                      byte-level text: this project's sources
--   scripts/llmlab scripts/train_gpt.lua file=book.txt        any text file
--   scripts/llmlab scripts/train_gpt.lua task=copy            a synthetic task: copy (or task=add)
-- Options as key=value: steps, batch, seq, d_model, n_layer, n_head, lr, warmup, seed,
-- metrics=out.jsonl (one JSON line per step), sample=N (generate N bytes at the end, text),
-- eval_every=N (held-out loss every N steps; default a tenth of the run), plot=loss.svg (the
-- loss curve as an SVG file too).
-- Held out: text keeps its last tenth (holdout=0.1) out of training; the synthetic tasks draw
-- fresh examples. Either way the evaluation batches are drawn once, with their own seed, so
-- the training batches are those of a run without evaluation.
local opts = { task = "text", steps = 200, batch = 8, seq = 64, d_model = 128, n_layer = 4, n_head = 4,
  lr = 1e-3, warmup = 20, seed = 1337, clip = 1.0, holdout = 0.1, eval_batches = 4 }
for _, a in ipairs(arg) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k then error("train_gpt: arguments are key=value, got " .. a, 0) end
  opts[k] = tonumber(v) or v
end
lab.manual_seed(opts.seed)

local source, vocab, seq_len, batch, held_batch
if opts.task == "text" then
  source = lab.data.text(opts.file)
  vocab, seq_len = 256, opts.seq
  local n_eval = math.floor(source.n * opts.holdout)
  if n_eval < seq_len + 1 or source.n - n_eval < seq_len + 1 then
    error(string.format("train_gpt: %d bytes of text cannot be split into training and held-out windows of %d bytes " ..
      "(holdout=%g)", source.n, seq_len + 1, opts.holdout), 0)
  end
  local train_part = { tokens = source.tokens:slice(1, 1, source.n - n_eval), n = source.n - n_eval, vocab = 256 }
  local held_part = { tokens = source.tokens:slice(1, source.n - n_eval + 1, source.n), n = n_eval, vocab = 256 }
  source.describe = string.format("%s (the last %d held out)", source.describe, n_eval)
  batch = function() return lab.data.text_batch(train_part, opts.batch, seq_len) end
  held_batch = function() return lab.data.text_batch(held_part, opts.batch, seq_len) end
elseif opts.task == "copy" or opts.task == "add" then
  source = opts.task == "copy" and lab.data.copy_task(opts.n or 8, opts.k or 10) or lab.data.add_task(opts.n or 3)
  vocab, seq_len = source.vocab, source.seq_len
  batch = function() return source.batch(opts.batch) end
  held_batch = batch
else
  error("train_gpt: task must be text, copy or add, got " .. tostring(opts.task), 0)
end

local model = lab.nn.GPT { vocab = vocab, d_model = opts.d_model, n_layer = opts.n_layer, n_head = opts.n_head,
  seq_len = seq_len }
lab.print0(string.format("data: %s", source.describe))
lab.print0(string.format("model: %s, %.2fM parameters, %.1f MFLOP per token (forward + backward)",
  model:describe(), model:num_parameters() / 1e6, model:flops_per_token() / 1e6))

-- the held-out batches, drawn once with their own seed (the training stream stays as it was)
local rng = lab.get_rng_state()
lab.manual_seed(opts.seed + 1)
local held = {}
for i = 1, opts.eval_batches do held[i] = { held_batch() } end
lab.set_rng_state(rng)
local function eval_loss()
  local sum = 0
  for _, b in ipairs(held) do
    local _, loss = model(b[1], b[2])
    sum = sum + loss:item()
  end
  return sum / #held
end

local result = lab.train.run { model = model, batch = batch, steps = opts.steps, lr = opts.lr, warmup = opts.warmup,
  clip = opts.clip, metrics = opts.metrics, log_every = opts.log_every or 10, eval = eval_loss,
  eval_every = opts.eval_every, sparkline = true }
lab.print0(string.format("final loss %.4f (held out %.4f), %.0f tokens/s, %.1f s", result.loss,
  result.evals[#result.evals].loss, result.tokens_per_s, result.time))
if lab.dist.rank() == 0 then
  local steps, eval_steps, eval_losses = {}, {}, {}
  for i = 1, #result.losses do steps[i] = i end
  for i, e in ipairs(result.evals) do eval_steps[i], eval_losses[i] = e.step, e.loss end
  lab.plot.line({ { name = "train", x = steps, y = result.losses }, { name = "held out", x = eval_steps, y = eval_losses } },
    { title = "loss", xlabel = "step", svg = opts.plot })
  if opts.plot then print("wrote " .. opts.plot) end
end

if opts.task ~= "text" then
  model:eval()
  local ids, tg = source.batch(256)
  local tok, seq = lab.data.accuracy(model, ids, tg)
  lab.print0(string.format("accuracy on 256 fresh examples: %.1f%% of answer tokens, %.1f%% of whole answers", 100 * tok, 100 * seq))
elseif (opts.sample or 0) > 0 then
  model:eval()
  local prompt = lab.tensor({ { string.byte("local ", 1, -1) } })
  local out = model:generate(prompt, { max_new_tokens = opts.sample, temperature = 0.8 }):tolist()[1]
  local chars = {}
  for i, b in ipairs(out) do chars[i] = string.char(b) end
  lab.print0("sample: " .. table.concat(chars))
end
