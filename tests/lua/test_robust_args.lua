-- Lua integers reach C ints through one checked conversion (ll_check_int): fractions, strings
-- and values beyond int are refused with the op and argument named (issue 11: cat's dim
-- (1 << 32) + 2 meant dim 2, chunk((1 << 32) + 2) made 2 chunks, broadcast from src 1 << 32
-- used rank 0, new_group({"a"}) and new_group({0.5}) meant rank 0). lab.is_tensor answers for
-- closed tensors; lab.cat names a closed element (its error path leaked the array). Run at 1
-- and 2 ranks.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local R = "rank " .. lab.dist.rank() .. ": "

T.test("dims, chunks and sizes beyond int or not integers are refused", function()
  local a = lab.ones(2, 2)
  T.raises(function() return lab.cat({ a, a }, (1 << 32) + 2) end, R .. "cat: dim 4294967298 out of range for a tensor of 2 dimensions")
  T.raises(function() return lab.cat({ a, a }, 1.5) end, R .. "cat: dim must be an integer, got 1.5")
  T.raises(function() return lab.stack({ a, a }, "1") end, R .. "stack: dim must be an integer, got string")
  T.raises(function() return lab.ones(4):chunk((1 << 32) + 2) end, R .. "chunk: chunks 4294967298 is out of range")
  T.raises(function() return lab.ones(4):chunk(0.5) end, R .. "chunk: chunks must be an integer, got 0.5")
  T.raises(function() return lab.ones(4):split("2") end, R .. "split: size must be an integer, got string")
  T.raises(function() return lab.ones(2, 3):sum(1.5) end, R .. "sum: dim must be an integer, got 1.5")
  T.raises(function() return lab.ones(2, 3):sum({ dim = 0.5 }) end, R .. "sum: dim must be an integer, got 0.5")
  T.raises(function() return lab.ones(2, 3):softmax((1 << 32) + 1) end, R .. "softmax: dim 4294967297 out of range")
  T.raises(function() return lab.ones(2, 3):transpose(1, 1 << 40) end, R .. "transpose: dim 1099511627776 out of range")
  T.eq(#lab.ones(4):chunk(2.0), 2, "an integral float is an integer, as in Lua")
  T.eq(lab.cat({ a, a }, -1).shape[2], 4, "negative dims still count from the end")
  T.eq(lab.stack({ a, a }, -1).shape[3], 2, "stack's dim may be one past the end")
end)

T.test("ranks, tags and group members are checked integers", function()
  local x = lab.ones(2)
  T.raises(function() lab.dist.broadcast(x, 1 << 32) end, R .. "broadcast: src 4294967296 is out of range")
  T.raises(function() lab.dist.broadcast(x, 0.5) end, R .. "broadcast: src must be an integer, got 0.5")
  T.raises(function() lab.dist.reduce(x, "0") end, R .. "reduce: dst must be an integer, got string")
  T.raises(function() lab.dist.send(x, (1 << 32) + 1) end, R .. "send: peer 4294967297 is out of range")
  T.raises(function() lab.dist.isend(x, 0, { tag = 0.5 }) end, R .. "isend: tag must be an integer, got 0.5")
  T.raises(function() lab.dist.irecv(x, 0, { tag = 1 << 40 }) end, R .. "irecv: tag 1099511627776 is out of range")
  T.raises(function() lab.dist.new_group({ "a" }) end, R .. "new_group: ranks[1] must be an integer, got string")
  T.raises(function() lab.dist.new_group({ 0, 0.5 }) end, R .. "new_group: ranks[2] must be an integer, got 0.5")
  T.raises(function() lab.dist.new_group({ 1 << 32 }) end, R .. "new_group: ranks[1] 4294967296 is not a rank")
  T.raises(function() lab.dist.split(0.5) end, R .. "split: color must be an integer, got 0.5")
  T.raises(function() lab.set_threads(1 << 40) end, R .. "set_threads: threads 1099511627776 is out of range")
  -- a group of every rank still works after the refusals
  local g = lab.dist.new_group((function() local t = {} for i = 0, lab.dist.world() - 1 do t[#t + 1] = i end return t end)())
  local y = lab.ones(2)
  lab.dist.all_reduce(y, { group = g })
  T.values(y, { lab.dist.world(), lab.dist.world() }, 0, "all_reduce over the new group")
end)

T.test("huge split sizes and partitions (fuzz findings split_chunk_overflow, pp_partition_hang)", function()
  local parts = lab.tensor({ 1, 2 }):split(math.maxinteger, -1)
  T.eq(#parts, 1, "a split size beyond the dim is one piece, as torch.split")
  T.values(parts[1], { 1, 2 }, 0, "the piece")
  T.eq(#lab.tensor({ 1, 2, 3 }):chunk(math.maxinteger >> 33), 3, "more chunks than elements")
  T.raises(function() return lab.pp.partition(lab.tensor({ 1, 2 }), 1 << 62) end, R .. "pp.partition: layers must be a list of modules, got a tensor")
  T.raises(function() return lab.pp.partition("x", 1e300) end, R .. "pp.partition: layers must be a list")
  T.raises(function() return lab.pp.partition({ lab.nn.Linear(2, 2) }, 1 << 62) end,
    R .. "pp.partition: n must be an integer between 1 and the number of layers (1), got 4611686018427387904")
  T.raises(function() return lab.pp.partition({ lab.nn.Linear(2, 2) }, 0.5) end, R .. "pp.partition: n must be an integer")
  T.eq(#lab.pp.partition({ lab.nn.Linear(2, 2), lab.nn.Linear(2, 2) }, 2), 2, "a good partition")
end)

T.test("is_tensor never raises; cat names a closed element", function()
  local t = lab.ones(2)
  t:close()
  T.eq(lab.is_tensor(t), true, "a closed tensor is still a tensor object")
  T.eq(lab.is_tensor(5), false, "a number")
  T.eq(lab.is_tensor({}), false, "a table")
  T.eq(lab.is_tensor(nil), false, "nil")
  for _ = 1, 100 do -- the error path used to leak the array each time
    T.raises(function() return lab.cat({ lab.ones(2), t }) end, R .. "cat: element 2 of the list was already closed")
  end
  T.raises(function() return lab.cat({ lab.ones(2), 3 }) end, R .. "cat: element 2 of the list is not a tensor")
  T.raises(function() return lab.cat(lab.ones(2)) end, R .. "cat: expected a list of tensors as argument 1, got a tensor")
  T.raises(function() return lab.stack(nil) end, R .. "stack: expected a list of tensors as argument 1, got nil")
end)

-- lab.data.default_corpus ran `find '<root>' ...` through io.popen: a quote in the path
-- closed the shell's quoting and the rest ran as a command (here: touch a marker file)
T.test("lab.data.default_corpus takes a path with quotes as a path, running nothing", function()
  local C = lab._ckpt
  local base = os.tmpname()
  os.remove(base)
  local marker = "llmlab_marker_" .. base:match("[^/]+$") -- (relative: a / would be a directory in the name)
  local dir = base .. "_x'; touch " .. marker .. "; echo '"
  C.mkdir(dir)
  C.mkdir(dir .. "/sub")
  C.mkdir(dir .. "/build")
  C.write_file(dir .. "/a.lua", "print('a')")
  C.write_file(dir .. "/sub/b.md", "# b")
  C.write_file(dir .. "/sub/c.txt", "not a source")
  C.write_file(dir .. "/build/d.c", "built")
  local ok, corpus = pcall(lab.data.default_corpus, dir)
  local f = io.open(marker, "r")
  if f then f:close() os.remove(marker) end
  C.remove_tree(dir)
  T.ok(f == nil, "no command ran (the marker file was made)")
  T.ok(ok, "the walk succeeded: " .. tostring(corpus))
  T.eq(corpus, "print('a')\n# b", "the .lua and .md files outside build/, in path order")
  T.raises(function() lab.data.default_corpus(base .. "_missing'dir") end,
    R .. "lab.data.default_corpus: cannot list " .. base .. "_missing'dir: No such file or directory")
  T.raises(function() lab.data.default_corpus(5) end, R .. "lab.data.default_corpus: bad argument #1 (a directory (string) expected, got 5)")
  T.raises(function() lab.data.text(5) end, R .. "lab.data.text: bad argument #1")
end)

-- Each of these left lua/lab as raw Lua text ("replicas.lua:62: attempt to index a number value
-- (local 'model')") or worse, until tests/fuzz/fuzz.lua failed on such errors: the function,
-- the argument and the value are named now.
T.test("the arguments the API fuzzer found unchecked are named", function()
  T.raises(function() lab.monitor.compare({ 1, 2 }) end, R .. "lab.monitor.compare: bad argument #1 (entry 1: a {name, tensor} pair expected, got 1)")
  T.raises(function() lab.replicas.check(2) end, R .. "lab.replicas.check: bad argument #1 (a lab.nn module or a wrapper of one (lab.ddp.wrap, lab.zero.wrap) expected, got 2)")
  T.raises(function() lab.replicas.restore(print, 0) end, R .. "lab.replicas.restore: bad argument #1 (a lab.nn module or a wrapper of one (lab.ddp.wrap, lab.zero.wrap) expected, got function)")
  local wrapped = lab.ddp.wrap(lab.nn.Linear(2, 2)) -- what the REPL's recovery tells users to pass
  lab.replicas.restore(wrapped, 0)
  T.eq(#lab.replicas.check(wrapped), 0, "check and restore take a DDP wrapper")
  T.raises(function() lab.replicas.settle(3) end, R .. "lab.replicas.settle: bad argument #1 (an asynchronous collective's handle")
  T.raises(function() lab.replicas.register(nil, "k", print) end, R .. "lab.replicas.register: bad argument #1 (the wrapper (a table) expected, got nil)")
  T.raises(function() lab.replicas.tree() end, R .. "lab.replicas.tree: bad argument #1 (a title expected, got nil)")
  T.raises(function() lab.plan_presets.free_options(0) end, R .. "lab.plan_presets.free_options: bad argument #1 (nil or a list of")
  T.raises(function() lab.plan_presets.apply_free({ a = true }) end, R .. "lab.plan_presets.apply_free: bad argument #1 (gpus[a]: a GPU preset table expected, got boolean)")
  T.raises(function() lab.nn.LoRALinear(lab.nn.Linear(4, 8), 1) end, R .. "LoRALinear: bad argument #2 (an options table or nil expected, got 1)")
  T.raises(function() lab.lora.apply(lab.nn.Sequential(lab.nn.Linear(4, 4)), { alpha = "x" }) end, "LoRALinear: bad argument #2 (opts.alpha: a number expected, got string)")
  local Foo = lab.nn.class("Foo")
  T.raises(function() Foo:param("w", lab.ones(2)) end, R .. "Module:param: self must be a module (call self:param(...) inside init), got the class Foo")
  T.raises(function() lab.cp.ring_attention(lab.randn(2, 3), lab.randn(2, 3), lab.randn(2, 3)) end,
    R .. "lab.cp.ring_attention: q must be [B, H, T/N, D] (4 dimensions), got shape [2, 3]")
  T.raises(function() lab.posttrain.mean_reward(lab.randn(2), lab.ones(2, 2, { dtype = "i64" })) end,
    R .. "lab.posttrain.mean_reward: bad argument #1 (a model (a lab.nn module or a wrapper of one) expected, got a tensor)")
  local mon = lab.monitor.new(lab.nn.Linear(2, 2))
  T.raises(function() mon:rerun() end, R .. "Monitor:rerun: bad argument #1 (a function recompute(rank) -> loss expected, got nil)")
  local z = lab.zero.wrap(lab.nn.Linear(2, 2))
  T.raises(function() z:load_checkpoint_done({}) end, R .. "ZeRO:load_checkpoint_done: bad argument #1 (the optimizer's step count")
  T.raises(function() lab.nn.CausalSelfAttention({ d_model = 4, n_head = 1 })(lab.randn(2, 3, 5)) end,
    R .. "CausalSelfAttention:forward: x must be [B, T, 4] (d_model 4), got shape [2, 3, 5]")
  T.raises(function() lab.optim.AdamW(lab.nn.Linear(2, 2):parameters(), { betas = lab.nn.Linear(2, 2) }) end,
    R .. "AdamW: bad argument #2 (opts.betas = {beta1, beta2} with each in [0, 1) expected, got a Linear module)")
  T.raises(function() lab.zero.wrap(lab.nn.Linear(2, 2), { betas = 2 }) end,
    R .. "lab.zero.wrap: bad argument #2 (opts.betas = {beta1, beta2} with each in [0, 1) expected, got 2)")
  T.raises(function() lab.optim.AdamW(lab.nn.Linear(2, 2):parameters(), { betas = { 0.9, 1 } }) end, R .. "AdamW: bad argument #2")
  T.raises(function() lab.tp.VocabParallelEmbedding(2, 5):forward({ 0 }) end,
    R .. "VocabParallelEmbedding:forward: bad argument #1 (a tensor expected, got table)")
  T.raises(function() lab.tp.vocab_parallel_cross_entropy(lab.randn(), lab.tensor({ 3 }, { dtype = "i64" })) end,
    R .. "lab.tp.vocab_parallel_cross_entropy: logits must be [..., V/p] (at least 1 dimension), got a 0-d tensor")
  T.raises(function() lab.posttrain.group_advantages({ lab.randn(), 1 }, 2) end,
    R .. "lab.posttrain.group_advantages: bad argument #1 (rewards[1]: a number expected, got a tensor)")
  T.raises(function() lab.tp.ParallelAttention({ d_model = 8, n_head = 8 })(lab.arange(3)) end,
    R .. "ParallelAttention:forward: x must be [B, T, 8] (d_model 8), got shape [3]")
  T.raises(function() lab.train.fmt_time("x") end, R .. "lab.train.fmt_time: bad argument #1 (a number of seconds expected, got string)")
  -- values the formatting could not print (string.format's %d refuses a float beyond 2^63)
  T.eq(lab.format_bytes(-1e300), "-1e+300 B", "format_bytes of a huge negative")
  T.eq(lab.format_bytes(2.5), "3 B", "format_bytes rounds")
  T.eq(lab.train.fmt_time(1e300), "2.78e+296h", "fmt_time of a huge duration")
  T.eq(lab.train.fmt_time(125.3), "2m05s", "fmt_time")
end)

-- A path with a NUL byte inside: C sees only the part before it. ckpt.save("a\0b", ...) looked
-- for a free step name with is_dir("a/step_...") while Lua appended to "a\0b": it looped forever.
T.test("a path with a NUL byte is refused, not truncated", function()
  T.raises(function() lab.ckpt.save("ckpt_nul\0x", { model = lab.nn.Linear(2, 2) }) end,
    R .. "ckpt.save: the directory name \"ckpt_nul\\0x\" holds a NUL byte")
  T.raises(function() lab.ones(2):save_npy("x\0.npy") end, R .. "save_npy: the path \"x\" is followed by a NUL byte")
  T.raises(function() lab.load_npy("x\0.npy") end, R .. "load_npy: the path \"x\" is followed by a NUL byte")
end)

T.finish()
