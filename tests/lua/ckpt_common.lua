-- Helpers shared by the checkpoint tests: a fresh temporary directory per run (rank 0 makes it
-- with mktemp and every rank learns its name, so parallel runs never share files), and file
-- surgery for the corruption tests.
local common = {}

function common.tmpdir(tag)
  local name = ""
  if lab.dist.rank() == 0 then
    local p = io.popen("mktemp -d /tmp/llmlab-" .. tag .. "-XXXXXXXX")
    name = p:read("l")
    p:close()
  end
  local buf = lab.zeros(256, { dtype = "i32" })
  if lab.dist.rank() == 0 then buf:narrow(1, 1, #name):copy_(lab.tensor({ name:byte(1, -1) }, { dtype = "i32" })) end
  lab.dist.broadcast(buf, 0)
  local chars = {}
  for i = 1, 256 do
    if buf[i] == 0 then break end
    chars[#chars + 1] = string.char(buf[i])
  end
  return table.concat(chars)
end

function common.remove(dir)
  lab.dist.barrier()
  if lab.dist.rank() == 0 then os.execute("rm -rf '" .. dir .. "'") end
end

function common.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

function common.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- flips bit 0 of the bytes at the given 0-based offsets
function common.flip(path, offsets)
  local s = common.read(path)
  local b = { s:byte(1, -1) }
  for _, o in ipairs(offsets) do b[o + 1] = b[o + 1] ~ 1 end
  local parts = {}
  for i = 1, #b, 4096 do parts[#parts + 1] = string.char(table.unpack(b, i, math.min(i + 4095, #b))) end
  common.write(path, table.concat(parts))
end

-- where the data of `key` starts in a safetensors file (0-based file offset) and its length
function common.data_range(path, key)
  local s = common.read(path)
  local n = string.unpack("<I8", s)
  local header = s:sub(9, 8 + n)
  local esc = key:gsub("%p", "%%%0")
  local b, e = header:match('"' .. esc .. '":{[^}]-"data_offsets":%[(%d+),(%d+)%]')
  assert(b, "no " .. key .. " in " .. path)
  return 8 + n + tonumber(b), tonumber(e) - tonumber(b)
end

return common
