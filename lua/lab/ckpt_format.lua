-- lab.ckpt's file format: what one rank writes and how a loader reads it back, trusting nothing.
--
-- A step directory holds, per saving rank r, two files:
--   rank<r>.safetensors  the tensors this rank holds (parameters, buffers, optimizer moments,
--                        fp32 masters), keyed by their global names ("model.blocks.1.attn.qkv.weight",
--                        "optim.<param>.exp_avg", "master.<param>"); its __metadata__ holds the
--                        step, the rank, a crc32 per tensor and the crc32 of the index below
--   rank<r>.json         the index: step, world, RNG state, optimizer counters, loss scale, extra,
--                        and for every tensor its dtype, its GLOBAL shape and where this rank's
--                        shard sits in it (box offsets and sizes, optionally a [from, to) range of
--                        the box's row-major elements, as ZeRO's flat shards and Megatron's
--                        flattened_range), so any layout can load it (torch DCP's idea).
-- The index is parsed by a bounds-checked C parser (JSON is data: nothing here is executed),
-- checked field by field, and checked against the safetensors header (names, dtypes, shapes)
-- and its checksum; every tensor's bytes against their crc32.
local sorted_keys = require("lab.sorted_keys")
local fmt = {}
local C = lab._ckpt

fmt.FORMAT = "llmlab-checkpoint"
fmt.VERSION = 1

function fmt.rank_file(r, ext) return string.format("rank%05d.%s", r, ext) end

-- ---- JSON writing (sorted keys: the same state gives the same bytes) ----

local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n == 0 then return false end
  for i = 1, n do if t[i] == nil then return false end end
  return true
end

local function jstr(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

local function encode(v, path, out)
  local ty = type(v)
  if ty == "table" then
    if is_array(v) then
      out[#out + 1] = "["
      for i, x in ipairs(v) do
        if i > 1 then out[#out + 1] = "," end
        encode(x, path .. "[" .. i .. "]", out)
      end
      out[#out + 1] = "]"
      return
    end
    local keys = {}
    for k in pairs(v) do
      if type(k) ~= "string" then
        error(string.format("%s has a key %s of type %s; a checkpoint stores string keys or lists", path,
          tostring(k), type(k)), 0)
      end
      keys[#keys + 1] = k
    end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = jstr(k)
      out[#out + 1] = ":"
      encode(v[k], path .. "." .. k, out)
    end
    out[#out + 1] = "}"
  elseif ty == "string" then
    out[#out + 1] = jstr(v)
  elseif math.type(v) == "integer" then
    out[#out + 1] = string.format("%d", v)
  elseif ty == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      error(string.format("%s is %s, which a checkpoint cannot store faithfully", path, tostring(v)), 0)
    end
    local s = string.format("%.17g", v)
    if not s:find("[%.eE]") then s = s .. ".0" end -- stays a float when read back
    out[#out + 1] = s
  elseif ty == "boolean" then
    out[#out + 1] = tostring(v)
  else
    error(string.format("%s is a %s, which a checkpoint cannot store", path, ty), 0)
  end
end

-- JSON text of v; raises naming the path of a value that cannot be stored faithfully
function fmt.encode(v, name)
  local out = {}
  encode(v, name or "value", out)
  return table.concat(out)
end

-- mkdir -p, each new directory fsynced into its parent
function fmt.mkdir_p(dir)
  local path = dir:sub(1, 1) == "/" and "" or "."
  for part in dir:gmatch("[^/]+") do
    path = path .. "/" .. part
    if not C.is_dir(path) then C.mkdir(path) end
  end
end

-- ---- shard descriptors ----
-- desc = {global = {..}, offsets = {..} (0-based), box = {..}, view = {..} or nil,
--         flat = {from, to} or nil}: the shard is the box at offsets inside the global tensor
-- (seen with shape `view` when given), or the elements [from, to) of that box in row-major order.

local function prod(s)
  local n = 1
  for _, d in ipairs(s) do n = n * d end
  return n
end
fmt.prod = prod

function fmt.desc_key(d)
  return table.concat(d.view or d.global, ",") .. "|" .. table.concat(d.offsets, ",") .. "|" ..
    table.concat(d.box, ",") .. "|" .. (d.flat and (d.flat[1] .. "," .. d.flat[2]) or "")
end

-- the shape of the data a shard holds
function fmt.desc_shape(d)
  if d.flat then return { d.flat[2] - d.flat[1] } end
  return d.box
end

-- ---- the index ----

-- index table of one rank; entries = list of {key, tensor, desc}
function fmt.make_index(r, world, step, meta, entries)
  local tensors = {}
  for _, e in ipairs(entries) do
    tensors[e.key] = { dtype = e.tensor.dtype, global = e.desc.global, offsets = e.desc.offsets, box = e.desc.box,
      view = e.desc.view, flat = e.desc.flat, shape = e.tensor.shape }
  end
  return { format = fmt.FORMAT, version = fmt.VERSION, rank = r, world = world, step = step, rng = meta.rng,
    extra = meta.extra, optimizer = meta.optimizer, amp = meta.amp, layout = meta.layout,
    file = fmt.rank_file(r, "safetensors"), tensors = tensors }
end

local DTYPES = { f32 = true, f64 = true, bf16 = true, f16 = true, i32 = true, i64 = true, bool = true,
  f8e4m3 = true, f8e5m2 = true }

local function check_dims(where, v, n)
  if type(v) ~= "table" or #v > 8 or (n and #v ~= n) then
    error(string.format("%s is not a list of %s sizes", where, n and tostring(n) or "at most 8"), 0)
  end
  for i = 1, #v do
    if math.type(v[i]) ~= "integer" or v[i] < 0 then error(string.format("%s[%d] is not a size >= 0", where, i), 0) end
  end
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > #v then error(string.format("%s is not a list", where), 0) end
  end
end

-- Checks an index read from `path` (a table from json_decode): every field the loader uses has
-- the right type and the shard descriptors fit their global shapes. Raises naming the field.
function fmt.check_index(idx, path, r)
  local function bad(fmt_, ...) error(path .. ": " .. string.format(fmt_, ...), 0) end
  if type(idx) ~= "table" then bad("not a JSON object") end
  if idx.format ~= fmt.FORMAT or idx.version ~= fmt.VERSION then
    bad("not an %s index of version %d (format %s, version %s)", fmt.FORMAT, fmt.VERSION, tostring(idx.format),
      tostring(idx.version))
  end
  if idx.rank ~= r then bad("says rank %s; its name says rank %d", tostring(idx.rank), r) end
  if math.type(idx.world) ~= "integer" or idx.world < 1 or idx.world > 1 << 20 then bad("world is not a rank count") end
  if math.type(idx.step) ~= "integer" or idx.step < 0 then bad("step is not an integer >= 0") end
  if type(idx.rng) ~= "table" or math.type(idx.rng.seed) ~= "integer" or math.type(idx.rng.offset) ~= "integer" then
    bad("rng is not {seed=, offset=} integers")
  end
  if idx.file ~= fmt.rank_file(r, "safetensors") then bad("file is not %s", fmt.rank_file(r, "safetensors")) end
  if idx.optimizer ~= nil then
    local o = idx.optimizer
    if type(o) ~= "table" or math.type(o.step_count) ~= "integer" or type(o.lr) ~= "number" or type(o.state) ~= "table" then
      bad("optimizer is not {step_count=, lr=, state=}")
    end
    for name, kinds in pairs(o.state) do
      if type(name) ~= "string" or type(kinds) ~= "table" then bad("optimizer.state is not {name = {kinds}}") end
      for _, k in ipairs(kinds) do
        if type(k) ~= "string" then bad("optimizer.state.%s is not a list of names", name) end
      end
    end
  end
  if idx.amp ~= nil and (type(idx.amp) ~= "table" or type(idx.amp.scale) ~= "number") then bad("amp is not {scale=, ...}") end
  if type(idx.tensors) ~= "table" then bad("tensors is not an object") end
  for key, t in pairs(idx.tensors) do
    local where = "tensors." .. tostring(key)
    if type(key) ~= "string" or type(t) ~= "table" then bad("%s is not an object", where) end
    if not DTYPES[t.dtype] then bad("%s.dtype is %s", where, tostring(t.dtype)) end
    check_dims(path .. ": " .. where .. ".global", t.global)
    check_dims(path .. ": " .. where .. ".shape", t.shape)
    local space = t.global
    if t.view ~= nil then
      check_dims(path .. ": " .. where .. ".view", t.view)
      if prod(t.view) ~= prod(t.global) then bad("%s.view has %d elements, global %d", where, prod(t.view), prod(t.global)) end
      space = t.view
    end
    check_dims(path .. ": " .. where .. ".offsets", t.offsets, #space)
    check_dims(path .. ": " .. where .. ".box", t.box, #space)
    for d = 1, #space do
      if t.offsets[d] + t.box[d] > space[d] then
        bad("%s: the box [%s] at [%s] does not fit in [%s]", where, table.concat(t.box, ","), table.concat(t.offsets, ","),
          table.concat(space, ","))
      end
    end
    if t.flat ~= nil then
      check_dims(path .. ": " .. where .. ".flat", t.flat, 2)
      if t.flat[1] > t.flat[2] or t.flat[2] > prod(t.box) then bad("%s.flat is outside its box", where) end
      if prod(t.shape) ~= t.flat[2] - t.flat[1] then bad("%s: shape and flat range differ in size", where) end
    elseif prod(t.shape) ~= prod(t.box) then
      bad("%s: shape [%s] and box [%s] differ in size", where, table.concat(t.shape, ","), table.concat(t.box, ","))
    end
  end
end

-- ---- writing one rank's part ----

-- The files of rank r's part: {path=, tensors=, metadata=} and {path=, bytes=}, for lab._ckpt.write;
-- the tensors must be contiguous (the caller snapshots them for async saves).
function fmt.files(dir, r, index, tensors_by_key)
  local text = fmt.encode(index, "checkpoint")
  local keys = sorted_keys(index.tensors)
  local list = {}
  for _, key in ipairs(keys) do list[#list + 1] = { key, tensors_by_key[key] } end
  return {
    { path = dir .. "/" .. fmt.rank_file(r, "safetensors"), tensors = list, metadata = {
      format = fmt.FORMAT, step = tostring(index.step), rank = tostring(r),
      index_crc32 = string.format("%08x", C.crc32(text)) } },
    { path = dir .. "/" .. fmt.rank_file(r, "json"), bytes = text },
  }
end

-- ---- reading a step directory ----

local Source = {}
Source.__index = Source

-- Reads and checks every rank's index in `path` (a step directory). Raises naming the file.
function fmt.open(path)
  local self = setmetatable({ path = path, index = {}, text = {}, files = {}, shards = {}, assembled = {} }, Source)
  local function read_index(r)
    local p = path .. "/" .. fmt.rank_file(r, "json")
    local text, err = C.read_file(p, 1 << 28)
    if not text then error(err, 0) end
    local idx, jerr = C.json_decode(text, p)
    if idx == nil then error(jerr, 0) end
    fmt.check_index(idx, p, r)
    self.index[r], self.text[r] = idx, text
    return idx
  end
  local first = read_index(0)
  self.world, self.step = first.world, first.step
  local dir_step = path:match("step_(%d+)[^/]*$")
  if dir_step and tonumber(dir_step) ~= self.step then
    error(string.format("%s/%s says step %d; the directory is step %d", path, fmt.rank_file(0, "json"), self.step,
      tonumber(dir_step)), 0)
  end
  for r = 1, self.world - 1 do
    local idx = read_index(r)
    if idx.world ~= self.world or idx.step ~= self.step then
      error(string.format("%s/%s says world %d, step %d; rank 0's index says world %d, step %d", path,
        fmt.rank_file(r, "json"), idx.world, idx.step, self.world, self.step), 0)
    end
  end
  for r = 0, self.world - 1 do -- every index against the checksum its tensor file records, before any use
    local md, err = C.read_safetensors_metadata(path .. "/" .. fmt.rank_file(r, "safetensors"))
    if not md then error(err, 0) end
    self:check_metadata(r, md)
  end
  -- the optimizer: counters from rank 0, moments listed by any rank (a pipeline stage lists its own)
  if first.optimizer then
    self.optimizer = { step_count = first.optimizer.step_count, lr = first.optimizer.lr, state = {} }
    for r = 0, self.world - 1 do
      for name, kinds in pairs((self.index[r].optimizer or {}).state or {}) do self.optimizer.state[name] = kinds end
    end
  end
  for r = 0, self.world - 1 do
    for key, t in pairs(self.index[r].tensors) do
      self.shards[key] = self.shards[key] or {}
      table.insert(self.shards[key], { rank = r, desc = t })
    end
  end
  return self
end

-- the metadata of rank r's tensor file against its index: the index's checksum, step, rank
function Source:check_metadata(r, md)
  local p = self.path .. "/" .. fmt.rank_file(r, "safetensors")
  local idx = self.index[r]
  local function bad(fmt_, ...) error(p .. ": " .. string.format(fmt_, ...), 0) end
  if md.format ~= fmt.FORMAT then bad("not an llmlab checkpoint file") end
  if md.index_crc32 ~= string.format("%08x", C.crc32(self.text[r])) then
    bad("its index %s fails its checksum (crc32 %08x, recorded %s): the index was changed", fmt.rank_file(r, "json"),
      C.crc32(self.text[r]), tostring(md.index_crc32))
  end
  if md.step ~= tostring(idx.step) or md.rank ~= tostring(r) then
    bad("holds step %s of rank %s; its index says step %d of rank %d", tostring(md.step), tostring(md.rank), idx.step, r)
  end
end

-- rank r's tensors, read and checked against its index (cached)
function Source:file(r)
  if self.files[r] then return self.files[r] end
  local p = self.path .. "/" .. fmt.rank_file(r, "safetensors")
  local f, err = C.read_safetensors(p)
  if not f then error(err, 0) end
  local idx = self.index[r]
  local function bad(fmt_, ...) error(p .. ": " .. string.format(fmt_, ...), 0) end
  self:check_metadata(r, f.metadata)
  for key, e in pairs(f.entries) do
    local want = idx.tensors[key]
    if not want then bad("holds %s, which its index does not list", key) end
    if e.crc == nil then bad("%s has no checksum", key) end
    if e.dtype ~= want.dtype then bad("%s is %s in the file, %s in the index", key, e.dtype, want.dtype) end
    if table.concat(e.shape, ",") ~= table.concat(want.shape, ",") then
      bad("%s has shape [%s] in the file, [%s] in the index", key, table.concat(e.shape, ", "),
        table.concat(want.shape, ", "))
    end
  end
  for key in pairs(idx.tensors) do
    if not f.entries[key] then bad("lacks %s, which its index lists", key) end
  end
  self.files[r] = f.tensors
  return f.tensors
end

-- the region of `t` (global shape, or seen through desc.view) that a descriptor's box covers
local function box_region(t, d)
  local v = d.view and t:view(d.view) or t
  for dim = 1, #d.box do
    if d.box[dim] ~= v.shape[dim] then v = v:narrow(dim, d.offsets[dim] + 1, d.box[dim]) end
  end
  return v
end

-- The whole tensor `key` from every shard (lowest rank wins among identical replicas); every
-- element must be covered exactly once. Cached.
function Source:global(key)
  if self.assembled[key] then return self.assembled[key] end
  local shards = self.shards[key]
  local d0 = shards[1].desc
  local full = lab.zeros(d0.global, { dtype = d0.dtype })
  local count = lab.zeros(d0.global, { dtype = "i32" })
  local seen = {}
  for _, s in ipairs(shards) do
    local d = s.desc
    if d.dtype ~= d0.dtype or table.concat(d.global, ",") ~= table.concat(d0.global, ",") then
      error(string.format("%s: rank %d's shard is %s [%s], rank %d's %s [%s]", key, s.rank, d.dtype,
        table.concat(d.global, ","), shards[1].rank, d0.dtype, table.concat(d0.global, ",")), 0)
    end
    local k = fmt.desc_key(d)
    if not seen[k] then
      seen[k] = true
      local data = self:file(s.rank)[key]
      local region, cregion = box_region(full, d), box_region(count, d)
      if d.flat then
        local n = d.flat[2] - d.flat[1]
        local tmp, ctmp = region:contiguous():clone(), cregion:contiguous():clone()
        tmp:view(-1):narrow(1, d.flat[1] + 1, n):copy_(data)
        ctmp:view(-1):narrow(1, d.flat[1] + 1, n):add_(1)
        region:copy_(tmp)
        cregion:copy_(ctmp)
      else
        region:copy_(data:view(d.box))
        cregion:add_(1)
      end
    end
  end
  if full:numel() > 0 and (count:min():item() ~= 1 or count:max():item() ~= 1) then
    error(string.format("%s: the shards in %s do not cover its [%s] elements exactly once", key, self.path,
      table.concat(d0.global, ",")), 0)
  end
  self.assembled[key] = full
  return full
end

-- The values for a destination shard `dest` (desc of the loading rank) of tensor `key`:
-- this rank's own shard when the layout is the same, else cut from the assembled tensor.
function Source:values(key, dest, r)
  local shards = self.shards[key]
  if not shards then error(string.format("%s is not in the checkpoint %s", key, self.path), 0) end
  local src = shards[1].desc
  if table.concat(src.global, ",") ~= table.concat(dest.global, ",") then
    error(string.format("%s has shape [%s] in the checkpoint, [%s] in the model", key, table.concat(src.global, ", "),
      table.concat(dest.global, ", ")), 0)
  end
  if src.dtype ~= dest.dtype then
    error(string.format("%s is %s in the checkpoint, %s in the model", key, src.dtype, dest.dtype), 0)
  end
  local want = fmt.desc_key(dest)
  for _, s in ipairs(shards) do
    if s.rank == r and fmt.desc_key(s.desc) == want then return self:file(r)[key] end
  end
  local region = box_region(self:global(key), dest):contiguous()
  if dest.flat then return region:view(-1):narrow(1, dest.flat[1] + 1, dest.flat[2] - dest.flat[1]) end
  return region
end

-- every file of rank r read and checked (what each rank does with its own part)
function Source:verify(r)
  if r < self.world then self:file(r) end
end

return fmt
