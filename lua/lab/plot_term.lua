-- Where a chart is drawn: how wide, and whether in colour. The answer comes from, in order,
-- the chart's own options (width=, colour=), the REPL's hook, the launcher's environment,
-- then this process's stdout.
--   The REPL hook: before every chunk the REPL sets lab.terminal = {columns=N, colour=bool}
--   on every rank from rank 0's terminal (shell/term_info.c), since a chunk's stdout is
--   captured (never a terminal) and the rank that draws may not be rank 0 (%on 1,3).
--   The launcher (llmlab -n N) tells the ranks it starts, whose stdout is mpirun's, whether
--   its own stdout is a terminal and how wide (LLMLAB_TERM, below).
-- Colour needs a terminal, NO_COLOR unset or empty (no-color.org), and TERM set, other than dumb.
local M = {}

local function env_colour_ok()
  local nc = os.getenv("NO_COLOR")
  if nc and nc ~= "" then return false end
  local t = os.getenv("TERM")
  return t ~= nil and t ~= "" and t ~= "dumb" -- no TERM: a terminal that says nothing of colour
end

-- Is stdout the user's terminal, and how wide? Under mpirun every rank's stdout is a pipe or a
-- pty of mpirun's (OpenMPI hands out ptys), so isatty cannot tell: the launcher says it in
-- LLMLAB_TERM ("<columns>" when its stdout is a terminal, "none" otherwise); a rank started by
-- mpirun without the launcher takes its stdout for no terminal.
local function stdout_terminal()
  local env = os.getenv("LLMLAB_TERM")
  if env then
    local cols = tonumber(env)
    return cols ~= nil, cols and math.floor(cols)
  end
  if os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMIX_RANK") or os.getenv("PMI_RANK") then return false end
  if not lab.isatty(1) then return false end
  return true, lab.tty_columns(1)
end

-- {width=, colour=} for a chart with these options. alone: only this rank prints it (the
-- REPL then labels its lines "[r] "; a chart every rank prints alike comes back as "[0-3] ").
function M.settings(opts, alone)
  local hook = rawget(lab, "terminal")
  local width, colour = opts.width, opts.colour
  if type(hook) == "table" then -- the REPL's: rank 0's terminal, or none
    if width == nil and math.type(hook.columns) == "integer" then width = hook.columns - M.label_width(alone) end
    if colour == nil then colour = hook.colour == true end
  else
    -- -e on several ranks labels lines too (shell/main.c sets output_labelled): leave room
    local tty, cols = stdout_terminal()
    if width == nil and cols then width = cols - M.label_width(alone) end
    if colour == nil then colour = tty and env_colour_ok() end
    if width == nil then width = (tonumber(os.getenv("COLUMNS") or "") or 80) - M.label_width(alone) end
  end
  if width == nil then width = tonumber(os.getenv("COLUMNS") or "") or 80 end
  return { width = math.min(math.max(math.floor(width), 24), 1000), colour = colour and true or false }
end

-- what the REPL writes before each line ("[1] " for this rank alone, "[0-3] " for all four)
function M.label_width(alone)
  if not rawget(lab.dist, "output_labelled") then return 0 end
  local n = lab.dist.world_group():size()
  if n == 1 then return 0 end
  return alone and #string.format("[%d] ", lab.dist.rank()) or #string.format("[0-%d] ", n - 1)
end

-- ANSI colours of the series, in order (blue, yellow, green, magenta, cyan, red), and their
-- SVG twins
M.ansi = { "34", "33", "32", "35", "36", "31" }
M.hex = { "#1f77b4", "#e6a700", "#2ca02c", "#b04fb0", "#17a2b8", "#d62728" }
function M.colour_of(i) return M.ansi[(i - 1) % #M.ansi + 1] end
function M.hex_of(i) return M.hex[(i - 1) % #M.hex + 1] end

return M
