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

-- crashes: match(name, repro) -> true to skip the call
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
  { id = "pp.partition-huge",
    why = "lab.pp.partition(layers, 2^62) loops over 2^62 stages (a hang): "
      .. "/work/wt/briefs/fuzz_findings/pp_partition_hang.md, robust",
    match = function(name, repro) return name == "lab.pp.partition" and has_absurd(repro) end },
}

-- errors without "rank N:" that are known (counted, not failed)
X.unranked = {
  { id = "luaL_argerror",
    why = "issue 11, 'bad argument #N to X' without the rank; robust item 9 (central fix)",
    pattern = "bad argument #%-?%d+ to " },
  { id = "lua/lab raw error",
    why = "issue 11, raw Lua errors from lua/lab/*.lua (attempt to index ...); robust item 9",
    pattern = "lua/lab/[%w_]+%.lua:%d+: " },
  { id = "raw error without position",
    why = "Lua runtime errors raised where no line is known (a C function or a metamethod on a "
      .. "lua/lab object: lab.nn.ModuleList(true), lab.optim.clip_grad_norm()); robust item 9",
    pattern = "^attempt to " },
  { id = "op: message without rank",
    why = "error() in lua/lab/*.lua naming the function but not the rank (prof.stop: no section is "
      .. "open; data.text: ...; load_state_dict: unexpected key; plan: arguments are key=value); robust item 9",
    pattern = "^[%w_.:]+: " },
}

return X
