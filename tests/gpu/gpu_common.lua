-- Shared by the GPU tests: skip (exit 77, ctest's SKIP_RETURN_CODE) where no CUDA device is
-- usable, and compare a CUDA result with its cpu twin within a per-dtype tolerance.
local G = {}
-- LLMLAB_GPU_TEST_DEVICE=sim runs these tests' own logic on the sim device (a CPU machine
-- checking the tests themselves); on a GPU machine they run on cuda
G.dev = os.getenv("LLMLAB_GPU_TEST_DEVICE") or "cuda"

function G.require_gpu()
  if G.dev == "cuda" and not lab.cuda.is_available() then
    print("no CUDA device: skipped (" .. lab.cuda.status() .. ")")
    os.exit(77)
  end
end

G.tol = { f64 = 1e-10, f32 = 2e-5, bf16 = 2e-2, f16 = 2e-3, i64 = 0, i32 = 0, bool = 0 }

-- max |a - b| / max(1, |b|) over every element, on the host in f64
function G.rel_err(a, b)
  local x, y = a:cpu():to("f64"), b:cpu():to("f64")
  if x:numel() == 0 then return 0 end
  return ((x - y):abs() / (y:abs() + 1)):max():item()
end

return G
