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
  { id = "zero-size-absurd",
    why = "a 0-element shape with an absurd size before the 0: lab_numel's product overflows "
      .. "(UBSan, runtime/tensor.c:161): /work/wt/briefs/fuzz_findings/numel_overflow_zero_dim.md, robust",
    match = function(_, repro) return has_absurd(repro) and repro:find("[(,{] ?0[,)}]") ~= nil end },
  { id = "split-huge",
    why = "split/chunk with a section size near 2^63: start + size overflows in runtime/join.c:87 "
      .. "(UBSan): /work/wt/briefs/fuzz_findings/split_chunk_overflow.md, robust",
    match = function(name, repro) return (name == ":split" or name == ":chunk") and has_absurd(repro) end },
  { id = "p2p-peer-truncated",
    why = "issue 11 'Lua integers are truncated to C int': isend to rank 2^32 sends to rank 0, so "
      .. "the matched irecv on rank 1 waits forever (a hang at 2 ranks); robust item 7",
    match = function(name, repro) return name == "lab.dist.isend/irecv" and repro:find("isend%(a, 429496729%d") ~= nil end },
  { id = "module-cycle",
    why = "a module appended into one of its own descendants (m:append(m)) makes printing, "
      .. "parameters() and state_dict() recurse forever (a hang): "
      .. "/work/wt/briefs/fuzz_findings/module_cycle.md. Skipped: add/append of a module an earlier "
      .. "call returned (it may be an ancestor of the receiver)",
    match = function(name, _, args, pooled)
      if name ~= "object:append" and name ~= "object:add" then return false end
      for _, a in pairs(args) do if pooled[a] and lab.nn.is_module(a) then return true end end
      return false
    end },
  { id = "pp.partition-huge",
    why = "lab.pp.partition(layers, 2^62) loops over 2^62 stages (a hang): "
      .. "/work/wt/briefs/fuzz_findings/pp_partition_hang.md, robust",
    match = function(name, repro) return name == "lab.pp.partition" and has_absurd(repro) end },
}

-- errors without "rank N:" that are known (counted, not failed)
X.unranked = {
  -- (bad argument #N, raw Lua errors of lua/lab/*.lua and "attempt to ..." were listed here
  -- until lua/lab/errors.lua, ddaf032, named the rank on every path to user code)
  { id = "fp8 state without rank",
    why = "lab.amp.DelayedScaling:check_state/load_state raise 'its FP8 state has 2 scaled tensors, "
      .. "this model 0' or 'FP8 tensor 1 is ...' (lua/lab/fp8.lua, no rank, no function name): "
      .. "/work/wt/briefs/fuzz_findings/fp8_state_unranked.md",
    pattern = "^[%w ]*FP8 " },
  { id = "op: message without rank",
    why = "error() in lua/lab/*.lua naming the function but not the rank (prof.stop: no section is "
      .. "open; data.text: ...; load_state_dict: unexpected key; plan: arguments are key=value); robust item 9",
    pattern = "^[%w_.:]+: " },
}

return X
