-- Every error that reaches the user names the rank (issue 11: about 9,500 fuzzer errors were
-- "bad argument #N to 'X'" without it, and 2,500 raw Lua errors came from lua/lab/*.lua, such
-- as lab.assert_close(lab.ones(2), 5) giving "init.lua:42: attempt to index a number value").
-- pcall, xpcall and coroutine.resume hand errors back with "rank N: " (lua/lab/errors.lua);
-- lua/lab's public helpers check their arguments. Run at 1 and 2 ranks.
-- Also: ModuleList and Sequential children by integer key (model.blocks[1]), as PyTorch indexes them.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local T = require("harness")
local R = "rank " .. lab.dist.rank() .. ": "

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  T.ok(not ok, "expected an error")
  return tostring(e)
end

T.test("luaL_check* argument errors name the rank and the function", function()
  local e = err_of(function() return string.rep() end)
  T.ok(e:find(R, 1, true) == 1, "rank first: " .. e)
  T.ok(e:find("bad argument #1 to 'rep'", 1, true) ~= nil, "function named: " .. e)
  e = err_of(lab.manual_seed, "x")
  T.ok(e:find(R, 1, true) == 1 and e:find("manual_seed", 1, true), "lab C function: " .. e)
  e = err_of(function() return lab.ones(2):fill_("x") end)
  T.ok(e:find(R, 1, true) == 1, "method: " .. e)
end)

T.test("lab's raw errors get the rank; the user's own errors are left as raised", function()
  -- a raw error inside a function of lua/lab (none of the public ones should give one now:
  -- they check their arguments; this one is made to) leaves it named by the function
  local t = {}
  t.f = load("return function(x) return x.y end", "@/somewhere/lua/lab/fake.lua")()
  lab._errors.wrap(t, "lab.fake.")
  local e = err_of(t.f, nil)
  T.ok(e:find(R .. "lab.fake.f: /somewhere/lua/lab/fake.lua:1: attempt to index", 1, true) == 1, "raw error in lua/lab: " .. e)
  e = err_of(function() return lab.moe.stats(nil) end)
  T.ok(e:find(R .. "lab.moe.stats: bad argument #1 (a lab.nn module expected, got nil)", 1, true) == 1, "moe.stats: " .. e)
  e = err_of(function() return lab.optim.clip_grad_norm({ lab.ones(2) }) end)
  T.ok(e:find(R, 1, true) == 1 and e:find("clip_grad_norm", 1, true), "names the function: " .. e)
  T.eq(err_of(error, "plain"), "plain", "a user's error() is theirs")
  T.eq(err_of(function() error("stop", 0) end), "stop", "with level 0 too")
  T.eq(err_of(function() error(R .. "already", 0) end), R .. "already", "a ranked message is left alone")
  local ok, obj = pcall(error, { code = 7 })
  T.ok(not ok and type(obj) == "table" and obj.code == 7, "error objects pass untouched")
  local okx, ex = xpcall(function() return string.rep() end, function(m) return "handled: " .. m end)
  T.ok(not okx and ex:find("handled: " .. R, 1, true) == 1, "xpcall's handler sees the rank: " .. tostring(ex))
  local co = coroutine.create(function() return lab.zeros("x") end)
  local okc, ec = coroutine.resume(co)
  T.ok(not okc and tostring(ec):find(R .. "zeros: size 1 must be an integer, got string", 1, true), "coroutine.resume: " .. tostring(ec))
  local w = coroutine.wrap(function() coroutine.yield(1) error("later") end)
  T.eq(w(), 1, "yield across the wrapped pcall still works")
  T.ok(select(2, pcall(w)):find("later", 1, true) ~= nil, "coroutine.wrap's error through pcall")
  local w2 = coroutine.wrap(function() return string.rep() end)
  T.ok(select(2, pcall(w2)):find(R, 1, true) == 1, "an argument error through coroutine.wrap and pcall")
  -- yields inside pcall inside a coroutine
  local co2 = coroutine.create(function() return pcall(function() coroutine.yield("y") return "done" end) end)
  T.eq(select(2, coroutine.resume(co2)), "y", "yield inside pcall")
  local _, ok2, v2 = coroutine.resume(co2)
  T.ok(ok2 == true and v2 == "done", "pcall resumed to completion")
end)

T.test("lua/lab helpers raise argument errors, not raw Lua errors", function()
  T.raises(function() lab.assert_close(lab.ones(2), 5) end, R .. "assert_close: bad argument #2 (a tensor expected, got 5)")
  T.raises(function() lab.assert_close(nil, lab.ones(2)) end, R .. "assert_close: bad argument #1 (a tensor expected, got nil)")
  T.raises(function() lab.allclose(lab.ones(2), lab.ones(2), "x") end, R .. "allclose: bad argument #3")
  T.raises(function() lab.max_abs_diff(lab.ones(2), 5) end, R .. "max_abs_diff: bad argument #2 (a tensor expected, got 5)")
  T.raises(function() lab.format_bytes("x") end, R .. "format_bytes: bad argument #1 (a number expected, got string)")
  T.raises(function() lab.dist.print_ranks(5) end, R .. "print_ranks: bad argument #1 (a string expected, got 5)")
  T.raises(function() lab.zeros(2, "x") end, R .. "zeros: size 2 must be an integer, got string")
  T.raises(function() lab.nn.GPT{vocab = 8, d_model = 4, n_layer = 1, n_head = 1, seq_len = 2}(lab.zeros(1, 3, {dtype = "i64"})) end,
    R .. "GPT:forward: a sequence of 3 tokens exceeds seq_len 2")
  T.eq(lab.max_abs_diff(3, 5), 2, "numbers still work")
  T.eq(lab.format_bytes(0 / 0):find("nan", 1, true) ~= nil, true, "format_bytes(NaN) prints (it raised a raw format error)")
  T.eq(lab.format_bytes(1536), "1.50 KiB", "format_bytes")
  lab.assert_close(lab.ones(2), lab.ones(2))
end)

T.test("fuzz findings: FP8 state errors name the rank; a module cannot contain itself", function()
  T.raises(function() lab.amp.DelayedScaling({}):check_state(5) end,
    R .. "amp.DelayedScaling:check_state: its FP8 state has no scaled tensors, this model 0")
  T.raises(function() lab.amp.DelayedScaling({}):load_state({ 1, 2 }) end, R .. "amp.DelayedScaling:check_state: its FP8 state has 2")
  local m = lab.nn.ModuleList({ lab.nn.Linear(3, 2) })
  T.raises(function() m:append(m) end, R .. "ModuleList.add: a module cannot contain itself (cycle through '2')")
  local a, b = lab.nn.ModuleList(), lab.nn.ModuleList()
  a:append(b)
  T.raises(function() b:append(a) end, R .. "ModuleList.add: a module cannot contain itself")
  T.eq(#m:parameters(), 2, "the refused append left the list as it was")
  m:append(lab.nn.Linear(2, 2))
  T.ok(m:at(2) ~= nil and m.n == 2, "the next append takes the next index")
  T.ok(tostring(m):find("Linear", 1, true) ~= nil, "and it still prints")
  local shared = lab.nn.Linear(2, 2)
  local s = lab.nn.Sequential({ shared, shared }) -- the same child twice is not a cycle
  T.eq(#s:parameters(), 2, "a shared child is fine")
end)

-- the same for both lists of children (Sequential had only string keys: s[1] was nil)
for _, cls in ipairs({ "ModuleList", "Sequential" }) do
  T.test(cls .. " indexes its children by integer, as PyTorch's does (issue 12)", function()
    local a, b = lab.nn.Linear(3, 2), lab.nn.Linear(2, 2)
    local m = lab.nn[cls]({ a, b })
    T.ok(m[1] == a and m[2] == b, "m[1], m[2] are the children appended")
    T.ok(m[1.0] == a and m[-1] == b and m[-2] == a, "integral floats, and negatives from the end")
    T.ok(m[3] == nil and m[0] == nil and m[-3] == nil, "outside 1..n is nil")
    T.ok(m["1"] == a and m:at(2) == b, "string keys and :at still work")
    T.eq(#m, 2, "#m")
    local seen = {}
    for i, c in ipairs(m) do seen[i] = c end
    T.ok(#seen == 2 and seen[1] == a and seen[2] == b, "ipairs walks the children")
    local names = {}
    for _, p in ipairs(m:named_parameters()) do names[#names + 1] = p[1] end
    T.eq(table.concat(names, " "), "1.weight 1.bias 2.weight 2.bias", "parameter names unchanged")
    local keys = {}
    for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    T.eq(table.concat(keys, " "), "1.bias 1.weight 2.bias 2.weight", "state_dict keys unchanged")
    local c = lab.nn.Linear(3, 2)
    m[1] = c
    T.ok(m[1] == c and m["1"] == c and rawget(m, 1) == nil, "m[1] = module replaces child 1")
    T.eq(#m:parameters(), 4, "and the replaced one's parameters are gone")
    T.raises(function() m[3] = lab.nn.Linear(1, 1) end, R .. cls .. ": index 3 is outside 1..2 (use :append to add one)")
    T.raises(function() m[2] = 5 end, R .. cls .. "[2]: expected a lab.nn module, got number")
    T.ok(m:append(lab.nn.Linear(2, 2)) == m and #m == 3 and m[-1] == m[3], ":append adds child 3")
    if cls == "Sequential" then -- its forward runs the children by the same names
      local x = lab.randn(4, 3)
      T.values(m(x), m[3](m[2](c(x))):tolist(), 0, "forward runs children 1, 2, 3 (1 replaced)")
    end
  end)
end

T.test("model.blocks[2] of a GPT (a ModuleList)", function()
  local g = lab.nn.GPT({ vocab = 8, d_model = 8, n_layer = 2, n_head = 2, seq_len = 4 })
  T.ok(g.blocks[2] == g.blocks["2"] and g.blocks[2].attn ~= nil and #g.blocks == 2, "model.blocks[2].attn")
  local first = g:named_parameters()[3][1]
  T.ok(first:find("^blocks%.1%.") ~= nil, "GPT names stay blocks.1....: " .. first)
end)

-- (before: "prof.stop: no section is open", "data.text: cannot read x", "load_state_dict:
-- unexpected key k", "plan: arguments are key=value", "lab 02: 1 check(s) failed", all without
-- the rank; "moe.lua:66: rank 0: MoE: ..." with a position in front). Each must start with it.
T.test("lua/lab's own errors start with the rank and the function", function()
  local function starts(f, want)
    local e = err_of(f)
    T.ok(e:find(R .. want, 1, true) == 1, "want '" .. R .. want .. "...', got: " .. e)
  end
  starts(function() lab.prof.stop() end, "lab.prof.stop: no section is open")
  starts(function() lab.data.text("/nonexistent_llmlab/x.txt") end, "lab.data.text: cannot read /nonexistent_llmlab/x.txt")
  local empty = os.tmpname()
  starts(function() lab.data.text(empty) end, "lab.data.text: the corpus " .. empty .. " is empty")
  os.remove(empty)
  local m = lab.nn.Linear(2, 2)
  starts(function() m:load_state_dict({ weight = lab.zeros(2, 2), bias = lab.zeros(2), extra = lab.zeros(1) }) end,
    "Module:load_state_dict: unexpected key extra")
  starts(function() m:load_state_dict({ weight = lab.zeros(2, 2) }) end, "Module:load_state_dict: missing key bias")
  starts(function() m:load_state_dict({ weight = lab.zeros(3, 2), bias = lab.zeros(2) }) end,
    "Module:load_state_dict: weight has shape [3, 2] in the file, [2, 2] in the model")
  starts(function() lab.plan.cli({ "gpus=8", "nonsense" }) end, "plan: cli: arguments are key=value")
  local print0 = lab.print0
  lab.print0 = function() end -- (the checker prints its verdict lines)
  local check, finish = lab.checker()
  check("always fails", false)
  starts(function() finish("lab 99") end, "lab 99: 1 check(s) failed")
  lab.print0 = print0
  starts(function() lab.moe.MoE(4, 8, { experts = 0 }) end, "MoE: ")
  starts(function() lab.dist.grid({ tp = 3 * lab.dist.world() }) end, "grid: ")
  starts(function() lab.pp.Pipeline({ lab.nn.Linear(2, 2) }, { schedule = "zigzag" }) end, "pp.Pipeline: schedule must be")
end)

-- issue 11 item: public functions of lua/lab gave raw Lua text for a wrong argument
-- ("lab.moe.stats: moe.lua:345: attempt to index a nil value"); each now checks at entry
-- (the fuzzer counts the rest: "raw lua/lab errors: N public functions")
T.test("lua/lab's public functions check their arguments", function()
  local cases = {
    { function() return lab.nn.Linear(nil, 2) end, "Linear: bad argument #1 (a positive integer (in features) expected, got nil)" },
    { function() return lab.nn.Embedding(4, 2, 5) end, "Embedding: bad argument #3 (an options table or nil expected, got 5)" },
    { function() return lab.nn.Sequential(lab.nn.Linear(2, 2), 3) end, "Sequential: bad argument #2 (a lab.nn module expected, got 3)" },
    { function() return lab.nn.MLP(2) end, "MLP: bad argument #1 (a config table expected, got 2)" },
    { function() return lab.nn.ModuleList()(lab.ones(1)) end, "ModuleList: has no forward" },
    { function() return lab.nn.Linear(2, 2):state_dict(5) end, "Module:state_dict: bad argument #1" },
    { function() return lab.nn.Linear(2, 2):load_state_dict({ weight = 3 }) end, "Module:load_state_dict: weight is a number, not a tensor" },
    { function() return lab.optim.AdamW(lab.nn.Linear(1, 1)) end, "lab.optim.AdamW: bad argument #1 (a list of parameters (model:parameters()) expected, got a Linear module)" },
    { function() return lab.optim.SGD({}, { lr = "x" }) end, "lab.optim.SGD: option lr must be a number, got string" },
    { function() return lab.optim.warmup_cosine(1, {}) end, "lab.optim.warmup_cosine: bad argument #2" },
    { function() return lab.ddp.wrap(lab.nn.Linear(3, 2), 0) end, "lab.ddp.wrap: bad argument #2 (an options table or nil expected, got 0)" },
    { function() return lab.zero.wrap(lab.nn.Linear(3, 2), { bucket_mb = true }) end, "lab.zero.wrap: bad argument #2 (opts.bucket_mb: a number expected, got boolean)" },
    { function() return lab.tp.ColumnParallelLinear() end, "ColumnParallelLinear: bad argument #1" },
    { function() return lab.tp.vocab_parallel_cross_entropy() end, "lab.tp.vocab_parallel_cross_entropy: bad argument #1 (a tensor expected, got nil)" },
    { function() return lab.pp.max_in_flight(lab.zeros(1), 2, 0, 4) end, "lab.pp.max_in_flight: bad argument #1" },
    { function() return lab.cp.ring_attention(nil, lab.ones(1), lab.ones(1)) end, "lab.cp.ring_attention: bad argument #1 (a tensor expected, got nil)" },
    { function() return lab.moe.MoE(function() end, 3) end, "MoE: bad argument #1" },
    { function() return lab.data.copy_task({}) end, "lab.data.copy_task: bad argument #1" },
    { function() return lab.lora.merge(5) end, "lab.lora.merge: bad argument #1 (a lab.nn module expected, got 5)" },
    { function() return lab.posttrain.token_logprobs({}, nil) end, "lab.posttrain.token_logprobs: bad argument #1" },
    { function() return lab.generate() end, "generate: bad argument #1" },
    { function() return lab.autograd.gradcheck(function() end, {}) end, "lab.autograd.gradcheck: the function returned a nil" },
    { function() return lab.prof.start(false) end, "lab.prof.start: bad argument #1" },
    { function() return lab.dist.grid(5) end, "lab.dist.grid: bad argument #1" },
    { function() return lab.amp.DelayedScaling(5) end, "amp.DelayedScaling: bad argument #1" },
    { function() return lab.nn.GPT({ vocab = 2, d_model = 2, n_layer = 1, n_head = 1, seq_len = 2 })(lab.tensor({ 1 })) end,
      "GPT:forward: ids must be [B, T] token ids, got shape [1]" },
  }
  for _, c in ipairs(cases) do
    local e = err_of(c[1])
    T.ok(e:find(R .. c[2], 1, true) == 1, "want '" .. R .. c[2] .. "...', got: " .. e)
    T.ok(not e:find("lua/lab/", 1, true), "no raw lua/lab text: " .. e)
  end
end)

T.finish()
