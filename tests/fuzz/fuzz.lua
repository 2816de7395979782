-- A seeded random-call fuzzer over llmlab's public Lua API: every lab.* function (found by
-- walking `lab`), every tensor method and operator, the methods of the objects calls return
-- (modules, optimizers, groups, handles, engines), collectives with identical calls on
-- every rank and matched point-to-point pairs, fed hostile arguments: wrong types, nil,
-- negative and absurd sizes, 0-size and strided tensors, NaN/inf, every dtype, wrong dims,
-- ragged tables, closed tensors, hooks that return anything.
--
--   build/llmlab tests/fuzz/fuzz.lua calls=20000 seed=1          (one rank)
--   build/llmlab -n 2 tests/fuzz/fuzz.lua calls=5000 seed=7      (identical calls on 2 ranks)
--   options: slow=SECONDS (a call slower than this fails, default 10), verbose=1 (every call)
--
-- What fails: a crash or sanitizer report (the process dies: tests/fuzz/run.sh then prints
-- the call in progress, written to fuzz_last_call.<rank> before each call), a hang (the
-- ctest timeout, or a collective's watchdog error), an error that is not a string naming the
-- rank ("rank N: ..."), a raw Lua error from inside lua/lab (no argument check named the
-- value), a call slower than slow=. The same seed gives the same calls, so
-- `calls=K seed=S` replays a failure at call K. Calls that still crash on main are skipped by
-- tests/fuzz/exclusions.lua, each entry naming its issue; that list must shrink to nothing.
local here = (arg and arg[0] or "tests/fuzz/fuzz.lua"):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local V = require("values")
local S = require("surface")
local X = require("exclusions")

local opts = { calls = 2000, seed = 1, slow = 10, verbose = 0 }
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^(%w+)=(.*)$")
  if not k or opts[k] == nil then error("fuzz.lua: arguments are calls=N seed=S slow=SECONDS verbose=0|1, got " .. a, 0) end
  opts[k] = math.tointeger(tonumber(v)) or tonumber(v)
end

local rank, world = lab.dist.rank(), lab.dist.world()
local G = V.new(opts.seed, os.getenv("PWD") or ".")
lab.manual_seed(opts.seed)
local real_print = print
local printed = 0
local threads0, watchdog0 = lab.threads(), 20
lab.dist.set_watchdog(watchdog0)

-- ---- the pools: values earlier calls returned, with the recipe that made them ----
local pool = { tensors = {}, objects = {}, modules = {} }
local pooled = setmetatable({}, { __mode = "k" }) -- every object the pools hold
local function remember(list, v, r, cap)
  if #r > 400 then return end
  if type(v) == "table" or type(v) == "userdata" then pooled[v] = true end
  if #list < cap then list[#list + 1] = { v = v, r = r } else list[G:int(cap)] = { v = v, r = r } end
end

local function eval(recipe)
  local f = load("return " .. recipe, "=recipe", "t", _ENV)
  return f()
end

-- ---- argument generators by kind: each returns value, recipe ----
local gen = {}
local recipe_errors = 0
function gen.T()
  if #pool.tensors > 0 and G:chance(0.35) then
    local e = G:pick(pool.tensors)
    return e.v, e.r
  end
  local r = G:tensor_recipe()
  local ok, t = pcall(eval, r)
  if not ok then recipe_errors = recipe_errors + 1 return nil, "nil --[[ " .. r .. " raised ]]" end
  return t, r
end
function gen.L()
  local n, vs, rs = G:int(4) - 1, {}, {}
  for i = 1, n do vs[i], rs[i] = gen.T() end
  if G:chance(0.1) then vs[n + 1], rs[n + 1] = 3, "3" end -- not a tensor
  return vs, "{" .. table.concat(rs, ", ") .. "}"
end
function gen.S() local s = G:size() return s, V.num_recipe(s) end
function gen.D() local d = G:dim() return d, V.num_recipe(d) end
function gen.I() local i = G:integer() return i, V.num_recipe(i) end
function gen.N() local x = G:number() return x, V.num_recipe(x) end
function gen.B() local b = G:chance(0.5) return b, tostring(b) end
function gen.DT() local d = G:dtype() return d, string.format("%q", d) end
function gen.STR() local s = G:string() return s, string.format("%q", s) end
function gen.P() local s = G:pick({ "x.npy", "ckpt", "sub/dir/x.npy", "/nonexistent_llmlab_fuzz/x", "", "fuzz_last_call.0" })
  return s, string.format("%q", s) end
function gen.NEST() return G:nested() end
function gen.SH()
  local n, vs, rs = G:int(4) - 1, {}, {}
  for i = 1, n do vs[i], rs[i] = gen.S() end
  if G:chance(0.05) then vs[1], rs[1] = "x", "'x'" end
  return vs, "{" .. table.concat(rs, ", ") .. "}"
end
function gen.IL() -- a list of ranks, sometimes hostile
  local n, vs, rs = G:int(3) - 1, {}, {}
  for i = 1, n do
    if G:chance(0.8) then vs[i] = G:int(world) - 1 else vs[i] = G:pick({ -1, world, 1 << 32, 0.5, "a" }) end
    rs[i] = type(vs[i]) == "string" and "'a'" or V.num_recipe(vs[i])
  end
  return vs, "{" .. table.concat(rs, ", ") .. "}"
end
function gen.SL()
  local vs, rs = {}, {}
  for i = 1, G:int(3) do
    vs[i] = G:pick({ "gpus=8", "model=gpt2", "tp=2", "x", "csv", "=", "gpus=0", "seq=-1" })
    rs[i] = string.format("%q", vs[i])
  end
  return vs, "{" .. table.concat(rs, ", ") .. "}"
end
function gen.M()
  if #pool.modules > 0 and G:chance(0.7) then local e = G:pick(pool.modules) return e.v, e.r end
  local r = G:pick({ "lab.nn.Linear(3, 2)", "lab.nn.LayerNorm(3)", "lab.nn.Embedding(5, 3)",
    "lab.nn.Sequential(lab.nn.Linear(3, 3), lab.nn.GELU())", "lab.nn.RMSNorm(2)" })
  return eval(r), r
end
function gen.PARAMS()
  local m, r = gen.M()
  if G:chance(0.8) then return m:parameters(), "(" .. r .. "):parameters()" end
  return gen.L()
end
function gen.CFG()
  local cfg, rs = {}, {}
  for _, k in ipairs({ "vocab", "d_model", "n_layer", "n_head", "seq_len" }) do
    local v = G:chance(0.85) and G:pick({ 1, 2, 4, 8 }) or G:pick({ 0, -1, 1 << 50, 2.5, "x" })
    if k == "n_layer" and type(v) == "number" and v > 2 and v < (1 << 40) then v = 2 end
    cfg[k] = v
    rs[#rs + 1] = k .. " = " .. (type(v) == "string" and "'x'" or V.num_recipe(v))
  end
  if G:chance(0.2) then cfg.dropout = G:number() rs[#rs + 1] = "dropout = " .. V.num_recipe(cfg.dropout) end
  return cfg, "{" .. table.concat(rs, ", ") .. "}"
end
function gen.F()
  -- a hook or callback returning a chosen value (a tensor of any shape, nil, a number)
  local k = G:int(4)
  if k == 1 then return function() end, "function() end" end
  if k == 2 then local n = G:number() return function() return n end, "function() return " .. V.num_recipe(n) .. " end" end
  if k == 3 then return function() error("fuzz: the callback's own error") end, "function() error(\"fuzz: the callback's own error\") end" end
  local t, r = gen.T()
  return function() return t end, "function() return " .. r .. " end"
end
function gen.FN()
  local f, r = gen.F()
  local b, rb = gen.F()
  return { forward = f, backward = b }, "{forward = " .. r .. ", backward = " .. rb .. "}"
end
local opt_keys = { "dtype", "requires_grad", "device", "group", "op", "async", "keepdim", "causal", "scale",
  "ignore_index", "label_smoothing", "lr", "momentum", "weight_decay", "betas", "bias", "src", "dst", "stage",
  "bucket_mb", "micro_batches", "schedule", "gather_output", "input_is_parallel", "tp", "dp", "pp", "r", "alpha",
  "model", "optimizer", "step", "extra", "gpus", "seq", "batch", "dim", "eps", "max_norm" }
local opt_kinds = { "B", "I", "N", "STR", "DT", "T", "M", "SH", "G" }
function gen.O()
  local o, rs = {}, {}
  for _ = 1, G:int(3) - 1 do
    local k = G:pick(opt_keys)
    local kind = k == "dtype" and "DT" or k == "group" and "G" or k == "model" and "M" or G:pick(opt_kinds)
    local v, r = gen[kind]()
    if k == "gpus" and type(v) == "number" and v > 64 then v, r = 64, "64" end -- see exclusions.lua (plan)
    if o[k] == nil then o[k] = v rs[#rs + 1] = k .. " = " .. r end
  end
  return o, "{" .. table.concat(rs, ", ") .. "}"
end
function gen.G()
  if #pool.objects > 0 and G:chance(0.3) then
    for _ = 1, 4 do
      local e = G:pick(pool.objects)
      -- by metatable name, not tostring: printing a module that contains itself never ends
      local mt = getmetatable(e.v)
      if type(mt) == "table" and rawget(mt, "__name") == "lab.dist.Group" then return e.v, e.r end
    end
  end
  if G:chance(0.7) then return lab.dist.world_group(), "lab.dist.world_group()" end
  return gen.A()
end
function gen.X()
  if #pool.objects > 0 then local e = G:pick(pool.objects) return e.v, e.r end
  return gen.M()
end
local any_kinds = { "T", "T", "T", "I", "N", "S", "STR", "B", "NIL", "SH", "NEST", "O", "F", "M", "X", "L" }
function gen.NIL() return nil, "nil" end
function gen.A() return gen[G:pick(any_kinds)]() end

-- the arguments of a call: from a hint (sometimes with one argument swapped for anything)
-- or 0 to 4 arguments of any kind
local function make_args(hint_name)
  local hints = S.hints[hint_name]
  local kinds = {}
  if hints and G:chance(0.8) then
    for _, k in ipairs(G:pick(hints)) do
      if k == "S*" then for _ = 1, G:int(5) - 1 do kinds[#kinds + 1] = "S" end else kinds[#kinds + 1] = k end
    end
    if #kinds > 0 and G:chance(0.25) then kinds[G:int(#kinds)] = "A" end
  else
    for i = 1, G:int(5) - 1 do kinds[i] = "A" end
  end
  local args, recs = {}, {}
  for i, k in ipairs(kinds) do args[i], recs[i] = gen[k]() end
  return args, recs, #kinds
end

-- ---- one call ----
local stats = { calls = 0, ok = 0, errors = 0, skipped = {}, unranked_known = {}, asymmetric = 0, p2p = 0 }
local violations, vorder = {}, {}
local time_by_name = {}
local function violation(kind, name, msg, repro)
  local key = kind .. " " .. name .. " " .. tostring(msg):gsub("%d+", "N"):sub(1, 120)
  local v = violations[key]
  if not v then
    v = { kind = kind, name = name, msg = tostring(msg), repro = repro, n = 0 }
    violations[key] = v
    vorder[#vorder + 1] = key
  end
  v.n = v.n + 1
end

-- the call in progress, for run.sh to print when the process dies: one file kept open and
-- rewritten in place (truncating and closing a file per call made ext4 flush it every time:
-- 26 of 38 s of a 4000-call run)
local last_call_file = "fuzz_last_call." .. rank
local last_call = assert(io.open(last_call_file, "w"))
local last_len = 0
local function note(k, repro)
  local text = string.format("call %d of `fuzz.lua seed=%d` on rank %d:\n%s\n", k, opts.seed, rank, repro)
  local pad = last_len > #text and string.rep(" ", last_len - #text) or ""
  last_call:seek("set", 0)
  last_call:write(text, pad)
  last_call:flush()
  last_len = #text
  if opts.verbose ~= 0 then real_print(string.format("[%d] %d %s", rank, k, repro)) end
end

-- public functions whose error was raw Lua text from lua/lab ("rank 0: lab.moe.stats:
-- .../lua/lab/moe.lua:345: attempt to index a nil value") instead of an argument error that
-- names the value: listed, and a failure (the list went to zero; it stays there)
local raw = {}
local function check_error(name, err, repro)
  if type(err) ~= "string" then return violation("non-string error", name, type(err), repro) end
  if err:find("lua/lab/[%w_]+%.lua:%d+:") then
    local fn = err:match("^rank %d+: ([%w_.]+:?[%w_]*): ") or name -- the function the message names, else the call
    if not raw[fn] then raw[fn] = { n = 0, repro = repro, msg = err } end
    raw[fn].n = raw[fn].n + 1
    violation("raw lua/lab error (no argument check)", fn, err, repro)
  end
  if err:find("no progress", 1, true) or err:find("watchdog", 1, true) then
    return violation("hang (watchdog)", name, err, repro)
  end
  if err:find("rank %d+: ") then return end
  if err:find("fuzz: the callback's own error", 1, true) then return end -- a user's error passes through as raised
  for _, m in ipairs(X.unranked) do
    if err:find(m.pattern) then
      stats.unranked_known[m.id] = (stats.unranked_known[m.id] or 0) + 1
      return
    end
  end
  violation("error without the rank", name, err, repro)
end

-- read every returned tensor (printing reads its first and last elements, tolist all of a
-- small one): a tensor whose shape promises more than its storage holds crashes here
local function touch(name, results, n, repro)
  for i = 1, n do
    local v = results[i]
    if lab.is_tensor(v) then
      local ok, err = pcall(function()
        local s = tostring(v)
        if v:numel() <= 64 then v:tolist() end
        return s
      end)
      if not ok then check_error(name .. " (reading its result)", err, repro) end
    end
  end
end

local function keep(results, n, repro)
  for i = 1, n do
    local v = results[i]
    if lab.is_tensor(v) then remember(pool.tensors, v, repro, 48)
    elseif lab.nn.is_module(v) then remember(pool.modules, v, repro, 12) remember(pool.objects, v, repro, 32)
    elseif type(v) == "userdata" or (type(v) == "table" and getmetatable(v)) then remember(pool.objects, v, repro, 32) end
  end
end

local function restore_globals()
  pcall(lab.set_default_device, "cpu")
  lab.set_grad_enabled(true)
  if lab.threads() ~= threads0 then lab.set_threads(threads0) end
  lab.dist.set_watchdog(watchdog0)
  lab.dist.set_checked(false)
end

local function run_call(k, name, call, repro, args)
  for _, e in ipairs(X.crashes) do
    if not e.off and e.match(name, repro, args or {}, pooled) then
      stats.skipped[e.id] = (stats.skipped[e.id] or 0) + 1
      return
    end
  end
  note(k, repro)
  stats.calls = stats.calls + 1
  local t0 = lab.clock()
  local results = table.pack(pcall(call))
  local took = lab.clock() - t0
  time_by_name[name] = (time_by_name[name] or 0) + took
  local ok = results[1]
  if world > 1 and lab.dist._agree_max(ok and 0 or 1) ~= (ok and 0 or 1) then
    stats.asymmetric = stats.asymmetric + 1
    ok = false -- keep nothing: the ranks' pools must stay the same
  elseif ok then
    stats.ok = stats.ok + 1
    table.remove(results, 1)
    touch(name, results, results.n - 1, repro)
    keep(results, results.n - 1, repro)
  else
    stats.errors = stats.errors + 1
    check_error(name, results[2], repro)
  end
  if took > opts.slow then violation("slow call", name, string.format("%.1f s", took), repro) end
  restore_globals()
end

local function arglist(recs, n, from)
  local parts = {}
  for i = from or 1, n do parts[#parts + 1] = recs[i] or "nil" end
  return table.concat(parts, ", ")
end

local functions = S.functions(lab)
local tensor_methods = S.methods(lab.ones(1))
local tensor_methods_table = getmetatable(lab.ones(1)).methods
-- (tensors have no __lt or __concat: Lua's own "attempt to compare" is not the API's error)
local binops = { "+", "-", "*", "/", "^", "%", "==", "#", "unm", "index", "newindex", "tostring" }

-- point-to-point in matched pairs: every rank sends to the next and receives from the
-- previous, with dtypes and sizes that match or not, and peers out of range
local function p2p(k)
  local a, ra = gen.T()
  local b, rb = a, ra
  if G:chance(0.5) then b, rb = gen.T() end
  local dst, rdst = (rank + 1) % world, "(lab.dist.rank() + 1) % lab.dist.world()"
  local src, rsrc = (rank - 1) % world, "(lab.dist.rank() - 1) % lab.dist.world()"
  if G:chance(0.2) then dst = G:pick({ -1, world, 1 << 32, 0.5 }) rdst = V.num_recipe(dst) end
  local repro = string.format("local a, b = %s, %s; local hs = lab.dist.isend(a, %s); local hr = lab.dist.irecv(b, %s); hr:wait(); hs:wait()",
    ra, rb, rdst, rsrc)
  stats.p2p = stats.p2p + 1
  run_call(k, "lab.dist.isend/irecv", function()
    local hs = lab.dist.isend(a, dst)
    local hr = lab.dist.irecv(b, src)
    hr:wait()
    hs:wait()
  end, repro)
end

local function one_call(k)
  local r = G:int(100)
  if r <= 3 then return p2p(k) end
  if r <= 45 then -- a lab function
    local f = G:pick(functions)
    local args, recs, n = make_args(f.name)
    return run_call(k, f.name, function() return f.fn(table.unpack(args, 1, n)) end,
      f.name .. "(" .. arglist(recs, n) .. ")")
  end
  if r <= 85 then -- a tensor method
    local t, rt = gen.T()
    if G:chance(0.03) then t, rt = gen.A() end
    local m = G:pick(tensor_methods)
    local args, recs, n = make_args(":" .. m)
    -- the method is taken from the tensor's method table, so a receiver that is not a
    -- tensor (nil, a number, a closed tensor) reaches the method's own checks
    local f = tensor_methods_table[m]
    return run_call(k, ":" .. m, function() return f(t, table.unpack(args, 1, n)) end,
      "(" .. rt .. "):" .. m .. "(" .. arglist(recs, n) .. ")")
  end
  if r <= 93 then -- an operator
    local op = G:pick(binops)
    local a, ra = gen.T()
    local b, rb
    if G:chance(0.6) then b, rb = gen.T() else b, rb = gen.A() end
    local f, repro
    if op == "unm" then f, repro = function() return -a end, "-(" .. ra .. ")"
    elseif op == "#" then f, repro = function() return #a end, "#(" .. ra .. ")"
    elseif op == "tostring" then f, repro = function() return tostring(a) end, "tostring(" .. ra .. ")"
    elseif op == "index" then
      local i, ri = gen.D()
      f, repro = function() return a[i] end, "(" .. ra .. ")[" .. ri .. "]"
    elseif op == "newindex" then
      local i, ri = gen.D()
      f, repro = function() a[i] = b end, "(" .. ra .. ")[" .. ri .. "] = " .. rb
    else
      local code = "return function(a, b) return a " .. op .. " b end"
      local fn = load(code)()
      f, repro = function() return fn(a, b) end, "(" .. ra .. ") " .. op .. " (" .. rb .. ")"
    end
    return run_call(k, "op " .. op, f, repro)
  end
  -- a method of an object an earlier call returned (module, optimizer, group, handle, engine)
  local o, ro = gen.X()
  local methods = S.methods(o)
  if #methods == 0 then return end
  local m = G:pick(methods)
  local args, recs, n = make_args(":" .. m)
  if m == "__call" then
    return run_call(k, "object()", function() return o(table.unpack(args, 1, n)) end,
      "(" .. ro .. ")(" .. arglist(recs, n) .. ")")
  end
  return run_call(k, "object:" .. m, function() return o[m](o, table.unpack(args, 1, n)) end,
    "(" .. ro .. "):" .. m .. "(" .. arglist(recs, n) .. ")", args)
end

-- ---- the run ----
local t_start = lab.clock()
print = function() printed = printed + 1 end -- the API's own printing (reports, trees) is not checked
local generator_errors = {}
for k = 1, opts.calls do
  -- building arguments can raise too (an object an earlier hostile call left broken): the
  -- call is then not made, and the first few such errors are listed at the end
  local ok, err = pcall(one_call, k)
  if not ok and #generator_errors < 5 then generator_errors[#generator_errors + 1] = k .. ": " .. tostring(err) end
end
print = real_print
last_call:close()
os.remove(last_call_file)

local function sorted_counts(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. " " .. t[k] end
  return table.concat(parts, ", ")
end

local bad = #vorder
local any_bad = world > 1 and lab.dist._agree_max(bad) or bad
if rank == 0 then
  print(string.format("fuzz: seed %d, %d ranks: %d calls (%d ok, %d raised, %d p2p pairs, %d asymmetric outcomes) "
    .. "over %d functions in %.1f s; %d lines printed by the API", opts.seed, world, stats.calls, stats.ok, stats.errors,
    stats.p2p, stats.asymmetric, #functions, lab.clock() - t_start, printed))
  if next(stats.skipped) then print("  skipped (exclusions.lua, known crashes): " .. sorted_counts(stats.skipped)) end
  if next(stats.unranked_known) then print("  errors without a rank, known (exclusions.lua): " .. sorted_counts(stats.unranked_known)) end
  local names = {}
  for n in pairs(time_by_name) do names[#names + 1] = n end
  table.sort(names, function(a, b) return time_by_name[a] > time_by_name[b] end)
  local top = {}
  for i = 1, math.min(5, #names) do top[i] = string.format("%s %.1f s", names[i], time_by_name[names[i]]) end
  print("  most time: " .. table.concat(top, ", "))
  local raw_names = {}
  for n in pairs(raw) do raw_names[#raw_names + 1] = n end
  table.sort(raw_names)
  print(string.format("  raw lua/lab errors (no argument check): %d public functions%s", #raw_names,
    #raw_names > 0 and (": " .. table.concat(raw_names, ", ")) or ""))
  if opts.verbose ~= 0 then
    for _, n in ipairs(raw_names) do print(string.format("    %s (%d): %s\n      %s", n, raw[n].n, raw[n].msg:sub(1, 200), raw[n].repro)) end
  end
  for _, e in ipairs(generator_errors) do print("  building the arguments of call " .. e) end
  if recipe_errors > 0 then print(string.format("  %d tensor recipes raised (the fuzzer's own values)", recipe_errors)) end
end
for _, key in ipairs(vorder) do
  local v = violations[key]
  io.stderr:write(string.format("FUZZ rank %d: %s in %s (%d times): %s\n    repro: %s\n", rank, v.kind, v.name, v.n,
    v.msg:sub(1, 300), v.repro))
end
if any_bad > 0 then
  error(string.format("rank %d: fuzz: %d kinds of failure on this rank (listed above)", rank, bad), 0)
end
