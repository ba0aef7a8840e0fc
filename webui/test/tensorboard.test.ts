import { describe, expect, it } from "vitest";

import type { Tensorboard } from "../src/api/types";
import { existing } from "../src/pages/tensorboard";

function tb(over: Partial<Tensorboard>): Tensorboard {
  return {
    id: "t",
    description: "TensorBoard (t)",
    state: "STATE_RUNNING",
    startTime: 0,
    resourcePool: "default",
    username: "alice",
    experimentIds: [3],
    trialIds: [7],
    serviceAddress: "/proxy/t/",
    exitStatus: "",
    ...over,
  };
}

describe("the TensorBoard button", () => {
  it("reuses the user's live TensorBoard over exactly this experiment", () => {
    const mine = tb({ id: "mine" });
    const list = [
      tb({ id: "bobs", username: "bob" }),
      tb({ id: "two", experimentIds: [3, 4] }),
      tb({ id: "ending", state: "STATE_TERMINATING" }),
      mine,
    ];
    expect(existing(list, "alice", 3)).toBe(mine);
    expect(existing(list, "alice", 4)).toBeUndefined();
    expect(existing([tb({ state: "STATE_QUEUED" })], "alice", 3)?.state).toBe("STATE_QUEUED");
  });
});
