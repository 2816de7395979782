-- Trains a small GPT and shows it learning.
--   scripts/llmlab scripts/train_gpt.lua                      byte-level text: this project's sources
--   scripts/llmlab scripts/train_gpt.lua file=book.txt        any text file
--   scripts/llmlab scripts/train_gpt.lua task=copy            a synthetic task: copy (or task=add)
-- Options as key=value: steps, batch, seq, d_model, n_layer, n_head, lr, warmup, seed,
-- metrics=out.jsonl (one JSON line per step), sample=N (generate N bytes at the end, text).
local opts = { task = "text", steps = 200, batch = 8, seq = 64, d_model = 128, n_layer = 4, n_head = 4,
  lr = 1e-3, warmup = 20, seed = 1337, clip = 1.0 }
for _, a in ipairs(arg) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k then error("train_gpt: arguments are key=value, got " .. a, 0) end
  opts[k] = tonumber(v) or v
end
lab.manual_seed(opts.seed)

local source, vocab, seq_len, batch
if opts.task == "text" then
  source = lab.data.text(opts.file)
  vocab, seq_len = 256, opts.seq
  batch = function() return lab.data.text_batch(source, opts.batch, seq_len) end
elseif opts.task == "copy" or opts.task == "add" then
  source = opts.task == "copy" and lab.data.copy_task(opts.n or 8, opts.k or 10) or lab.data.add_task(opts.n or 3)
  vocab, seq_len = source.vocab, source.seq_len
  batch = function() return source.batch(opts.batch) end
else
  error("train_gpt: task must be text, copy or add, got " .. tostring(opts.task), 0)
end

local model = lab.nn.GPT { vocab = vocab, d_model = opts.d_model, n_layer = opts.n_layer, n_head = opts.n_head,
  seq_len = seq_len }
lab.print0(string.format("data: %s", source.describe))
lab.print0(string.format("model: %s, %.2fM parameters, %.1f MFLOP per token (forward + backward)",
  model:describe(), model:num_parameters() / 1e6, model:flops_per_token() / 1e6))

local result = lab.train.run { model = model, batch = batch, steps = opts.steps, lr = opts.lr, warmup = opts.warmup,
  clip = opts.clip, metrics = opts.metrics, log_every = opts.log_every or 10 }
lab.print0(string.format("final loss %.4f, %.0f tokens/s, %.1f s", result.loss, result.tokens_per_s, result.time))

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
