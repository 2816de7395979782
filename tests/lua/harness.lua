-- A small test harness for Lua tests run on every rank. Each check that fails is printed
-- with the rank and the test's name; finish() raises if anything failed, so the job's
-- exit status is non-zero.
--
-- The placement option, LLMLAB_TEST_PLACE=DEVICE (ctest's place.* lane sets sim): the default
-- device stays cpu; a test builds its models and data there and moves them with T.place, as
-- PyTorch's build-then-model.to('cuda') idiom does, so every wrapper and every allocation in
-- lua/lab meets tensors on a device nobody set as the default. Without the option T.place
-- returns what it is given (the sim lane sets the default device instead).
local T = { failed = 0, passed = 0, current = "?" }
local rank = lab.dist.rank()

-- (tests/gpu/on_gpu.lua sets the global LLMLAB_TEST_PLACE to its GPU device instead)
T.place_device = rawget(_G, "LLMLAB_TEST_PLACE") or os.getenv("LLMLAB_TEST_PLACE")
if T.place_device == "" then T.place_device = nil end
if T.place_device and lab.default_device() ~= "cpu" then
  error(string.format("rank %d: LLMLAB_TEST_PLACE=%s needs the default device left at cpu, not %s",
    rank, T.place_device, lab.default_device()), 0)
end

-- a module (moved in place, returned) or a tensor (a copy on the device) where the
-- placement option puts it; anything else, or no option, as it is
function T.place(x)
  if not T.place_device or not (lab.is_tensor(x) or lab.nn.is_module(x)) then return x end
  return x:to(T.place_device)
end

local function fail(msg, level)
  T.failed = T.failed + 1
  local info = debug.getinfo(level or 3, "Sl")
  io.stderr:write(string.format("FAIL rank %d [%s] %s:%d: %s\n", rank, T.current,
    info and info.short_src or "?", info and info.currentline or 0, msg))
end

function T.test(name, fn)
  T.current = name
  local ok, err = pcall(fn)
  if not ok then fail("unexpected error: " .. tostring(err), 2) else T.passed = T.passed + 1 end
end

function T.eq(got, want, what)
  if got ~= want then fail(string.format("%s: got %s, want %s", what or "eq", tostring(got), tostring(want))) end
end

function T.ok(cond, what)
  if not cond then fail(what or "condition is false") end
end

function T.near(got, want, tol, what)
  tol = tol or 1e-6
  if math.abs(got - want) > tol * math.max(1, math.abs(want)) then
    fail(string.format("%s: got %.10g, want %.10g", what or "near", got, want))
  end
end

-- every element of tensor t equals the Lua list (nested tables) want, within tol
function T.values(t, want, tol, what)
  local got = t:tolist()
  local function cmp(g, w, path)
    if type(w) == "table" then
      if type(g) ~= "table" or #g ~= #w then
        fail(string.format("%s: shape differs at %s", what or "values", path), 5)
        return false
      end
      for i = 1, #w do if not cmp(g[i], w[i], path .. "[" .. i .. "]") then return false end end
      return true
    end
    local ok = (type(w) == "boolean") and (g == w) or math.abs(g - w) <= (tol or 0) * math.max(1, math.abs(w))
    if not ok then fail(string.format("%s: %s is %s, want %s", what or "values", path, tostring(g), tostring(w)), 5) end
    return ok
  end
  cmp(got, want, "t")
end

-- fn must raise an error whose message contains every given plain substring
function T.raises(fn, ...)
  local ok, err = pcall(fn)
  if ok then fail("expected an error, none was raised") return end
  err = tostring(err)
  for _, s in ipairs({ ... }) do
    if not err:find(s, 1, true) then fail(string.format("error %q does not mention %q", err, s)) end
  end
  return err
end

function T.finish()
  -- the whole job fails if any rank failed
  local f = lab.tensor({ T.failed }, { dtype = "i64" })
  lab.dist.all_reduce(f)
  if rank == 0 then
    print(string.format("%d tests ran on rank 0; %d failed checks on all ranks", T.passed, f[1]))
  end
  if f[1] > 0 then error(string.format("%d test failures", f[1]), 0) end
end

return T
