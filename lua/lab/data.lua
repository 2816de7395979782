-- Training data for the GPT labs: a byte-level text corpus and two synthetic tasks whose
-- answers can be checked exactly. Every batch is (ids, targets) of shape [B, T] with 0-based
-- token ids; targets are -100 (ignored by cross_entropy) where there is nothing to predict.
local errors = require("lab.errors")
local data = {}

-- ---- byte-level text ----

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The project's own sources (C, Lua, Markdown) when no file is given: the files under root
-- (default ".") ending in .c, .h, .lua or .md, outside build/ directories, in path order.
-- The walk is lab._list_files (C: readdir, no shell), so any path is only a path.
local source_suffix = { c = true, h = true, lua = true, md = true }
function data.default_corpus(root)
  errors.arg(root == nil or type(root) == "string", "lab.data.default_corpus", 1, "a directory (string)", root)
  root = root or "."
  local files, why = lab._list_files(root)
  if not files then errors.raise("lab.data.default_corpus", "cannot list %s: %s", root, why) end
  table.sort(files)
  local parts = {}
  for _, path in ipairs(files) do
    local ext = path:match("%.(%w+)$")
    if ext and source_suffix[ext] and not path:find("/build/", 1, true) then parts[#parts + 1] = read_file(path) end
  end
  return table.concat(parts, "\n")
end

function data.text(path)
  errors.arg(path == nil or type(path) == "string", "lab.data.text", 1, "a file name (string) or nil", path)
  local s
  if path then
    s = read_file(path)
    if not s then errors.raise("lab.data.text", "cannot read %s", path) end
  else
    s = data.default_corpus()
  end
  if #s < 2 then errors.raise("lab.data.text", "the corpus %s is empty", path or "(project sources)") end
  -- bytes as an i64 tensor, built in chunks so a large file does not need a giant table
  local n = #s
  local t = lab.empty(n, { dtype = "i64" })
  local chunk = 1 << 16
  for at = 1, n, chunk do
    local last = math.min(n, at + chunk - 1)
    t:slice(1, at, last):copy_(lab.tensor({ s:byte(at, last) }))
  end
  return { tokens = t, vocab = 256, n = n, describe = string.format("%d bytes of text", n) }
end

-- random windows of T+1 bytes: ids are the first T, targets the next T
function data.text_batch(corpus, B, T)
  errors.arg(type(corpus) == "table" and lab.is_tensor(corpus.tokens) and math.type(corpus.n) == "integer",
    "lab.data.text_batch", 1, "a corpus (lab.data.text)", corpus)
  errors.posint("lab.data.text_batch", 2, B, "batch")
  errors.posint("lab.data.text_batch", 3, T, "tokens")
  if T + 1 >= corpus.n then errors.raise("lab.data.text_batch", "windows of %d tokens do not fit in a corpus of %d", T + 1, corpus.n) end
  local starts = lab.randint(0, corpus.n - T - 1, { B }):tolist()
  local dev = corpus.tokens.device -- the batch is where the corpus is
  local ids, tg = lab.empty(B, T, { dtype = "i64", device = dev }), lab.empty(B, T, { dtype = "i64", device = dev })
  for b = 1, B do
    local s = starts[b] + 1
    ids[b] = corpus.tokens:slice(1, s, s + T - 1)
    tg[b] = corpus.tokens:slice(1, s + 1, s + T)
  end
  return ids, tg
end

-- ---- copy: n random symbols, a separator, then the same symbols again ----
-- vocab: symbols 0..k-1, separator k. Only the copied half is scored.
function data.copy_task(n, k)
  errors.posint("lab.data.copy_task", 1, n, "symbols per sequence")
  errors.posint("lab.data.copy_task", 2, k, "alphabet size")
  local task = { vocab = k + 1, seq_len = 2 * n + 1, describe = string.format("copy %d symbols of %d", n, k) }
  function task.batch(B)
    local src = lab.randint(0, k, { B, n }):tolist()
    local ids, tg = {}, {}
    for b = 1, B do
      local seq = {}
      for i = 1, n do seq[i] = src[b][i] end
      seq[n + 1] = k
      for i = 1, n do seq[n + 1 + i] = src[b][i] end
      local row_ids, row_tg = {}, {}
      for t = 1, 2 * n + 1 do
        row_ids[t] = seq[t]
        -- position t predicts seq[t + 1]; only predictions of the copy are scored
        row_tg[t] = (t >= n + 1 and t < 2 * n + 1) and seq[t + 1] or -100
      end
      row_tg[2 * n + 1] = -100
      ids[b], tg[b] = row_ids, row_tg
    end
    return lab.tensor(ids), lab.tensor(tg)
  end
  return task
end

-- ---- addition: "a+b=" then the sum's digits, least significant first ----
-- digits 0-9, '+' = 10, '=' = 11. a and b have n digits; the sum has n + 1.
function data.add_task(n)
  errors.posint("lab.data.add_task", 1, n, "digits")
  if n > 18 then errors.raise("lab.data.add_task", "%d digits do not fit in a Lua integer (at most 18)", n) end
  local plus, eq = 10, 11
  -- a (n) '+' b (n) '=' sum (n + 1): 3n + 3 tokens, of which the model reads 3n + 2
  local task = { vocab = 12, seq_len = 3 * n + 2, describe = string.format("%d-digit addition", n) }
  function task.batch(B)
    local ids, tg = {}, {}
    local a = lab.randint(0, 10, { B, n }):tolist()
    local c = lab.randint(0, 10, { B, n }):tolist()
    for b = 1, B do
      local seq = {}
      for i = 1, n do seq[#seq + 1] = a[b][i] end
      seq[#seq + 1] = plus
      for i = 1, n do seq[#seq + 1] = c[b][i] end
      seq[#seq + 1] = eq
      -- digits are written most significant first; the sum comes out reversed
      local carry = 0
      for i = n, 1, -1 do
        local s = a[b][i] + c[b][i] + carry
        seq[#seq + 1] = s % 10
        carry = s // 10
      end
      seq[#seq + 1] = carry
      local L = #seq -- 3n + 3
      local row_ids, row_tg = {}, {}
      for t = 1, L - 1 do
        row_ids[t] = seq[t]
        row_tg[t] = (t >= 2 * n + 2) and seq[t + 1] or -100
      end
      ids[b], tg[b] = row_ids, row_tg
    end
    return lab.tensor(ids), lab.tensor(tg)
  end

  -- For post-training (lab.posttrain): the prompt "a+b=" (2n + 2 tokens) and the answer
  -- (n + 1 tokens, least significant digit first), whose correctness is known exactly.
  task.prompt_len, task.answer_len = 2 * n + 2, n + 1
  -- the right answer (a list of 0-based tokens) to a prompt (a list of at least 2n + 2 tokens)
  function task.answer(prompt)
    local out, carry = {}, 0
    for i = n, 1, -1 do
      local s = prompt[i] + prompt[n + 1 + i] + carry
      out[#out + 1] = s % 10
      carry = s // 10
    end
    out[#out + 1] = carry
    return out
  end
  -- B prompts [B, 2n + 2] (i64)
  function task.prompts(B)
    local ids = task.batch(B)
    return ids:narrow(2, 1, task.prompt_len):contiguous()
  end
  -- the verifiable reward: 1 for the exact answer, 0 otherwise
  function task.reward(prompt, completion)
    local want = task.answer(prompt)
    for i = 1, #want do
      if completion[i] ~= want[i] then return 0 end
    end
    return 1
  end
  -- preference pairs of whole sequences [B, 3n + 3]: chosen ends in the right answer,
  -- rejected in the right answer with one digit replaced by another (a near miss)
  function task.preference_pairs(B)
    local prompts = task.prompts(B):tolist()
    local pos = lab.randint(1, n + 2, { B }):tolist()  -- which answer digit is wrong
    local delta = lab.randint(1, 10, { B }):tolist()   -- by how much (mod 10, never 0)
    local chosen, rejected = {}, {}
    for b, p in ipairs(prompts) do
      local right = task.answer(p)
      local c, r = {}, {}
      for i = 1, #p do c[i], r[i] = p[i], p[i] end
      for i, d in ipairs(right) do
        c[#p + i] = d
        r[#p + i] = i == pos[b] and (d + delta[b]) % 10 or d
      end
      chosen[b], rejected[b] = c, r
    end
    return { chosen = lab.tensor(chosen), rejected = lab.tensor(rejected), prompt_len = task.prompt_len }
  end
  return task
end

-- Teacher-forced accuracy on the scored positions: per token and per whole sequence.
function data.accuracy(model, ids, tg)
  errors.module("lab.data.accuracy", 1, model)
  errors.tensor("lab.data.accuracy", 2, ids)
  errors.tensor("lab.data.accuracy", 3, tg)
  return lab.no_grad(function()
    local pred = model(ids):argmax(-1) - 1 -- argmax counts from 1, token ids from 0
    local scored = tg:ne(-100)
    local right = pred:eq(tg):bool():to("i64") * scored:to("i64")
    local per_seq_right = right:sum(2)
    local per_seq_scored = scored:to("i64"):sum(2)
    local token_acc = right:sum():item() / math.max(1, scored:to("i64"):sum():item())
    local seq_acc = per_seq_right:eq(per_seq_scored):to("i64"):sum():item() / ids.shape[1]
    return token_acc, seq_acc
  end)
end

return data
