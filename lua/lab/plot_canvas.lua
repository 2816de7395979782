-- The character grid every terminal chart is drawn on: cells of one character and an
-- optional colour, written as text (ANSI colour codes only when asked), and the braille
-- canvas that line charts draw dots on (2 x 4 dots per cell, U+2800 + the dots' bits).
local M = {}
local Grid = {}
Grid.__index = Grid

function M.grid(w, h)
  local g = setmetatable({ w = w, h = h, ch = {}, col = {} }, Grid)
  for y = 1, h do
    g.ch[y], g.col[y] = {}, {}
    for x = 1, w do g.ch[y][x] = " " end
  end
  return g
end

-- one character (a UTF-8 string of one code point) at column x, row y (1-based); outside: dropped
function Grid:set(x, y, ch, colour)
  if x < 1 or x > self.w or y < 1 or y > self.h then return end
  self.ch[y][x], self.col[y][x] = ch, colour
end

function Grid:get(x, y) return self.ch[y] and self.ch[y][x] end

-- text from column x (cut at the right edge); returns the column after it
function Grid:text(x, y, s, colour)
  for _, c in utf8.codes(s) do
    self:set(x, y, utf8.char(c), colour)
    x = x + 1
  end
  return x
end

-- the grid as lines; colour codes around runs of one colour when colour is on. Trailing
-- blanks are dropped, so plain output has no invisible tail.
function Grid:render(colour)
  local lines = {}
  for y = 1, self.h do
    local parts, cur = {}, nil
    local last = 0
    for x = 1, self.w do
      if self.ch[y][x] ~= " " then last = x end
    end
    for x = 1, last do
      local c = colour and self.col[y][x] or nil
      if c ~= cur then
        if cur then parts[#parts + 1] = "\27[0m" end
        if c then parts[#parts + 1] = "\27[" .. c .. "m" end
        cur = c
      end
      parts[#parts + 1] = self.ch[y][x]
    end
    if cur then parts[#parts + 1] = "\27[0m" end
    lines[y] = table.concat(parts)
  end
  return table.concat(lines, "\n")
end

-- Braille: dot (dx, dy) of a cell, dx 0-1 and dy 0-3, is one bit of U+2800 + bits.
local BIT = { [0] = { [0] = 0x01, 0x02, 0x04, 0x40 }, [1] = { [0] = 0x08, 0x10, 0x20, 0x80 } }
M.BRAILLE_BLANK = utf8.char(0x2800)

local Dots = {}
Dots.__index = Dots

-- a canvas of w x h cells: 2w x 4h dots, (0, 0) the top left
function M.dots(w, h)
  return setmetatable({ w = w, h = h, bits = {}, col = {} }, Dots)
end

function Dots:dot(px, py, colour)
  if px < 0 or py < 0 or px >= 2 * self.w or py >= 4 * self.h then return end
  local cx, cy = px // 2, py // 4
  local k = cy * self.w + cx
  self.bits[k] = (self.bits[k] or 0) | BIT[px % 2][py % 4]
  if colour then self.col[k] = colour end
end

-- a straight line of dots (Bresenham) from (x0, y0) to (x1, y1). pattern(i) says whether the
-- i-th dot of the series is drawn (dashes); i continues from `count` and is returned.
function Dots:line(x0, y0, x1, y1, colour, pattern, count)
  count = count or 0
  local dx, dy = math.abs(x1 - x0), -math.abs(y1 - y0)
  local sx, sy = x0 < x1 and 1 or -1, y0 < y1 and 1 or -1
  local err = dx + dy
  while true do
    if not pattern or pattern(count) then self:dot(x0, y0, colour) end
    count = count + 1
    if x0 == x1 and y0 == y1 then break end
    local e2 = 2 * err
    if e2 >= dy then err = err + dy; x0 = x0 + sx end
    if e2 <= dx then err = err + dx; y0 = y0 + sy end
  end
  return count
end

-- copies the dots onto grid cells from column x0, row y0 (cells without dots are left alone)
function Dots:blit(grid, x0, y0)
  for k, b in pairs(self.bits) do
    local cx, cy = k % self.w, k // self.w
    grid:set(x0 + cx, y0 + cy, utf8.char(0x2800 + b), self.col[k])
  end
end

-- whether the cell (cx, cy), 0-based, has any dot
function Dots:has(cx, cy) return self.bits[cy * self.w + cx] ~= nil end

return M
