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

T.finish()
