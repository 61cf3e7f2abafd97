// Plans one collective alone on the given inputs (the planner tests).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "core/planner.h"

namespace weft::core {

inline Plan planOneTask(const PlanInputs& in, device::Func func, ncclDataType_t dtype, device::RedOpKind op,
                        size_t count) {
  static uint64_t buffer[8];  // the planner reads no data
  CollTask task{};
  task.func = func;
  task.sendbuff = buffer;
  task.recvbuff = buffer;
  task.count = count;
  task.dtype = dtype;
  task.op.kind = op;
  Plan plan;
  EXPECT_TRUE(planTasks(in, {task}, {}, &plan).ok());
  EXPECT_FALSE(plan.channels.empty() || plan.channels[0].empty());
  return plan;
}

}  // namespace weft::core
