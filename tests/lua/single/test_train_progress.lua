-- The progress line that lab.train.run prints when it is not quiet (the path every user of
-- scripts/train_gpt.lua sees): durations of a minute or more used to raise in string.format.
package.path = (arg[0]:match("(.*/)") or "./") .. "../?.lua;" .. package.path
local T = require("harness")

T.test("fmt_time: seconds, minutes, hours, from floats", function()
  local want = { [0] = "0s", [0.4] = "0s", [59.4] = "59s", [59.6] = "1m00s", [60] = "1m00s", [125.3] = "2m05s",
    [3599.4] = "59m59s", [3600] = "1h00m", [3725.9] = "1h02m", [86400 * 3 + 61] = "72h01m" }
  for s, w in pairs(want) do T.eq(lab.train.fmt_time(s), w, "fmt_time(" .. s .. ")") end
  T.eq(lab.train.fmt_time(0 / 0), "?", "fmt_time(nan)")
  T.eq(lab.train.fmt_time(math.huge), "?", "fmt_time(inf)")
end)

T.test("progress_line: the ETA from the average step time", function()
  -- step 10 of 2000 done after 6.3 s: 1990 steps left at 0.63 s = 1253.7 s
  T.eq(lab.train.progress_line(9, 2000, 3.25, 1e-3, 812.4, 6.3),
    "step    10/2000  loss 3.2500  lr 1.00e-03       812 tok/s  ETA 20m54s", "line with a 20-minute ETA")
  T.ok(lab.train.progress_line(0, 100000, 5.5, 5e-5, 900, 1.5):match("ETA 41h39m$"), "line with an ETA in hours")
end)

T.test("train.run prints its progress lines when not quiet", function()
  lab.manual_seed(3)
  local task = lab.data.copy_task(3, 5)
  local model = lab.nn.GPT { vocab = task.vocab, d_model = 16, n_layer = 1, n_head = 2, seq_len = task.seq_len }
  local lines, real_print = {}, print
  print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
  local ok, err = pcall(lab.train.run, { model = model, batch = function() return task.batch(4) end, steps = 12,
    log_every = 5 })
  print = real_print
  T.ok(ok, "train.run raised: " .. tostring(err))
  -- steps 1, 6, 11 (every 5) and the last one, 12
  T.eq(#lines, 4, "number of progress lines")
  for i, step in ipairs({ 1, 6, 11, 12 }) do
    T.ok((lines[i] or ""):match("^step +" .. step .. "/12  loss %d+%.%d+  lr [%d.e+-]+ +%d+ tok/s  ETA %d+s$"),
      "progress line " .. i .. ": " .. tostring(lines[i]))
  end
end)

T.test("a long run prints an ETA in minutes", function()
  -- 6002 steps, the first made to last 30 ms or more (a wait in on_step): after two steps
  -- 6000 remain at 15 ms to a few hundred ms each, an ETA between 1.5 and 60 minutes.
  -- The run is stopped from on_step at the third step, before anything else is printed.
  lab.manual_seed(4)
  local task = lab.data.copy_task(3, 5)
  local model = lab.nn.GPT { vocab = task.vocab, d_model = 16, n_layer = 1, n_head = 2, seq_len = task.seq_len }
  local lines, real_print = {}, print
  print = function(...) lines[#lines + 1] = table.concat({ ... }, "\t") end
  local ok, err = pcall(lab.train.run, { model = model, batch = function() return task.batch(4) end, steps = 6002,
    log_every = 1, on_step = function(step)
      if step == 0 then
        local t = lab.clock()
        while lab.clock() - t < 0.03 do end
      elseif step == 2 then
        error("planted stop", 0)
      end
    end })
  print = real_print
  T.eq(ok and "finished" or err, "planted stop", "the run ends at the planted stop (not an error of its own)")
  T.eq(#lines, 2, "progress lines")
  T.ok((lines[2] or ""):match("^step +2/6002 .* ETA %d+m%d%ds$"), "ETA in minutes: " .. tostring(lines[2]))
end)

T.finish()
