-- Calls the fuzzer skips because they still crash (or hang) on main, and error messages
-- known to lack the rank. Each entry names the issue that fixes it; when the fix lands, the
-- entry goes (the fuzzer then checks the call like any other). An empty list is the goal.
local X = {}

-- an integer literal no size, dim or index can be (what values.lua draws as absurd)
local absurd = { "1125899906842624", "4611686018427387904", "math%.maxinteger", "math%.mininteger", "2147483648",
  "4294967298", "1099511627776" }
local function has_absurd(repro)
  for _, p in ipairs(absurd) do if repro:find(p) then return true end end
  return false
end
local function any_of(name, list)
  for _, n in ipairs(list) do if name == n then return true end end
  return false
end

-- crashes: match(name, repro, args, pooled) -> true to skip the call (args: the call's
-- arguments for object methods; pooled: the set of objects earlier calls returned)
X.crashes = {
  -- (fixed on main and removed: size-overflow and zero-size-absurd, save_npy-empty, split-huge,
  -- pp.partition-huge, p2p-peer-truncated; module-cycle: Module:add refuses a child that
  -- contains the module, 91dc5ce)
}

-- errors without "rank N:" that are known (counted, not failed)
X.unranked = {
  -- (bad argument #N, raw Lua errors of lua/lab/*.lua and "attempt to ..." were listed here
  -- until lua/lab/errors.lua, ddaf032, named the rank on every path to user code; "fp8 state
  -- without rank" went with 91dc5ce, and "op: message without rank" (prof.stop, data.text,
  -- load_state_dict, plan.cli, checker) when lua/lab raised its own errors through errors.raise)
}

return X
