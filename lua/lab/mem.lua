-- lab.mem in Lua: the per-rank report of the measured account, and estimate{}, the same
-- account from formulas (the ZeRO paper's), so a measurement can be checked against theory
-- and theory can be asked about models that do not fit here.
local errors = require("lab.errors")
local mem = lab.mem
local TAGS = { "param", "grad", "optimizer", "activation", "comm", "other" }

-- prints, on rank 0, every rank's current and peak bytes by tag; ranks with identical
-- accounts are shown once with their rank set; then the current bytes as a stacked bar per
-- rank (opts: chart=false leaves it out, svg= writes it as SVG, width=)
function mem.report(group, opts)
  errors.group("lab.mem.report", 1, group)
  errors.opts("lab.mem.report", 2, opts)
  opts = opts or {}
  local s = mem.stats()
  local mine = {}
  for k, tag in ipairs(TAGS) do mine[k] = s.tags[tag].current end
  local per_rank = {}
  for r, t in ipairs(lab.dist.all_gather(lab.tensor(mine, { dtype = "f64" }), { group = group })) do per_rank[r] = t:tolist() end
  local lines = {}
  for _, tag in ipairs(TAGS) do
    local t = s.tags[tag]
    if t.peak > 0 then
      lines[#lines + 1] = string.format("%-10s %12s  (peak %s)", tag, lab.format_bytes(t.current), lab.format_bytes(t.peak))
    end
  end
  lines[#lines + 1] = string.format("%-10s %12s  (peak %s)", "total", lab.format_bytes(s.current), lab.format_bytes(s.peak))
  local all = lab.dist.gather_strings(table.concat(lines, "\n"), group)
  if lab.dist.rank() ~= 0 then return s end
  local done = {}
  for r = 1, #all do
    if not done[r] then
      local ranks = {}
      for q = r, #all do
        if all[q] == all[r] then
          done[q] = true
          ranks[#ranks + 1] = q - 1
        end
      end
      print(string.format("rank %s:", table.concat(ranks, ",")))
      for line in all[r]:gmatch("[^\n]+") do print("  " .. line) end
    end
  end
  -- the current bytes as stacked bars, a bar per rank and a segment per tag held anywhere
  local labels, series = {}, {}
  for r = 1, #per_rank do labels[r] = "rank " .. (r - 1) end
  for k, tag in ipairs(TAGS) do
    local values, held = {}, false
    for r = 1, #per_rank do
      values[r] = per_rank[r][k]
      held = held or values[r] > 0
    end
    if held then series[#series + 1] = { name = tag, values = values } end
  end
  if #series > 0 and opts.chart ~= false then
    lab.plot.bar({ labels = labels, series = series }, { stacked = true, fmt = "bytes", title = "current bytes by tag",
      svg = opts.svg, width = opts.width })
  end
  return s
end

local BYTES = { f32 = 4, f64 = 8, bf16 = 2, f16 = 2 }

-- estimate{params=, dtype='f32', optimizer='adamw'|'adam'|'sgd'|'sgd_momentum',
--          mixed_precision=false, zero=0..3, dp=1} -> {params=, grads=, optimizer=, total=}
-- bytes per rank. Mixed precision keeps 2-byte params and grads and a 4-byte master copy
-- with the moments in the optimizer (K = 12 for Adam); plain f32 Adam is 4 + 4 + 8 = 16
-- bytes per parameter. ZeRO divides the optimizer states (stage >= 1), then the gradients
-- (>= 2), then the parameters (3) by dp.
function mem.estimate(o)
  errors.type("lab.mem.estimate", 1, o, "table", "an options table {params=, ...}")
  local psi = o.params
  if type(psi) ~= "number" then errors.raise("lab.mem.estimate", "params (the parameter count) is required, got %s", tostring(psi)) end
  local dp, stage = o.dp or 1, o.zero or 0
  local opt = o.optimizer or "adamw"
  local p_bytes, g_bytes, k
  if o.mixed_precision then
    p_bytes, g_bytes = 2, 2
    k = (opt == "adam" or opt == "adamw") and 12 or (opt == "sgd_momentum" and 8 or 4)
  else
    p_bytes = BYTES[o.dtype or "f32"] or 4
    g_bytes = p_bytes
    k = (opt == "adam" or opt == "adamw") and 2 * p_bytes or (opt == "sgd_momentum" and p_bytes or 0)
  end
  local est = { params = p_bytes * psi, grads = g_bytes * psi, optimizer = k * psi }
  if stage >= 1 then est.optimizer = est.optimizer / dp end
  if stage >= 2 then est.grads = est.grads / dp end
  if stage >= 3 then est.params = est.params / dp end
  est.total = est.params + est.grads + est.optimizer
  est.bytes_per_param = est.total / psi
  return est
end

return mem
