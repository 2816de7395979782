-- lab.dist.grid{tp=, cp=, ep=, pp=, dp=}: the process grid of 4D/5D parallelism and every
-- group each parallelism needs, in Megatron-LM's rank order "tp-cp-ep-dp-pp": tensor
-- parallelism varies fastest (its ranks are neighbours, inside a node, where its frequent
-- all-reduces are cheapest), pipeline stages slowest (their point-to-point traffic is the
-- lightest, it may cross nodes):
--     rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
-- Expert parallelism is carved out of data parallelism (Megatron-Core, DeepSpeed-MoE): the
-- dp replicas of the dense layers are ep x edp, dp_rank = ep_rank + ep * edp_rank; a MoE
-- layer's experts are sharded over the ep ranks and each shard is replicated over the
-- expert-data-parallel ranks (edp, times cp: context-parallel ranks hold the same experts).
-- Groups (every rank is a member of one of each): tp_group, cp_group, dp_group (dense
-- replicas), dp_cp_group (dense gradients under CP), ep_group, edp_group (expert
-- gradients), pp_group. world = tp x cp x dp x pp; ep divides dp.
local errors = require("lab.errors")
local grid = {}

local function bad(fmt, ...) error(string.format("rank %d: grid: " .. fmt, lab.dist.rank(), ...), 0) end

local Grid = {}
Grid.__index = Grid

function grid.new(opts)
  errors.opts("lab.dist.grid", 1, opts)
  opts = opts or {}
  local world, rank = lab.dist.world(), lab.dist.rank()
  for _, k in ipairs({ "tp", "cp", "ep", "pp", "dp" }) do
    local v = opts[k]
    if v ~= nil and (math.type(v) ~= "integer" or v < 1) then bad("%s must be a positive integer, got %s", k, tostring(v)) end
  end
  local tp, cp, ep, pp = opts.tp or 1, opts.cp or 1, opts.ep or 1, opts.pp or 1
  local dp = opts.dp or world // (tp * cp * pp)
  if tp * cp * dp * pp ~= world then
    bad("tp %d x cp %d x dp %d x pp %d = %d does not match the world of %d ranks", tp, cp, dp, pp, tp * cp * dp * pp, world)
  end
  if dp % ep ~= 0 then bad("ep %d must divide dp %d (expert parallelism splits the data-parallel replicas)", ep, dp) end
  local g = setmetatable({ tp = tp, cp = cp, ep = ep, pp = pp, dp = dp, edp = dp // ep, world = world, rank = rank }, Grid)
  local rest = rank
  g.tp_rank = rest % tp; rest = rest // tp
  g.cp_rank = rest % cp; rest = rest // cp
  g.dp_rank = rest % dp; rest = rest // dp
  g.pp_rank = rest
  g.ep_rank, g.edp_rank = g.dp_rank % ep, g.dp_rank // ep

  -- the world rank at given coordinates
  function g.rank_at(c)
    local d = (c.dp or c.ep and (c.ep + ep * (c.edp or 0))) or 0
    return (c.tp or 0) + tp * ((c.cp or 0) + cp * (d + dp * (c.pp or 0)))
  end
  -- each group: its members vary the named coordinates and share the others; the colour
  -- is the rank with those coordinates at zero, the key the position inside the group
  local function make(name, varies)
    local coords = { tp = g.tp_rank, cp = g.cp_rank, ep = g.ep_rank, edp = g.edp_rank, pp = g.pp_rank }
    local base = {}
    for k, v in pairs(coords) do base[k] = varies[k] and 0 or v end
    local color = g.rank_at(base)
    local key = 0 -- position inside the group, in rank order
    for _, k in ipairs({ "pp", "edp", "ep", "cp", "tp" }) do
      if varies[k] then
        local size = ({ tp = tp, cp = cp, ep = ep, edp = dp // ep, pp = pp })[k]
        key = key * size + coords[k]
      end
    end
    g[name .. "_group"] = lab.dist.split(color, key)
  end
  make("tp", { tp = true })
  make("cp", { cp = true })
  make("dp", { ep = true, edp = true })
  make("dp_cp", { ep = true, edp = true, cp = true })
  make("ep", { ep = true })
  make("edp", { edp = true, cp = true })
  make("pp", { pp = true })
  return g
end

-- what each group of this rank is: "tp [0,1] cp [0] ..." (world ranks)
function Grid:describe()
  local parts = {}
  for _, k in ipairs({ "tp", "cp", "ep", "edp", "dp", "pp" }) do
    local grp = self[k .. "_group"]
    parts[#parts + 1] = string.format("%s [%s]", k, table.concat(grp:ranks(), ","))
  end
  return table.concat(parts, "  ")
end

return grid
