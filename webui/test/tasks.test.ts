import { describe, expect, it } from "vitest";

import type { InteractiveTask } from "../src/api/types";
import { interactiveTask } from "../src/api/types";
import { decode } from "../src/api/decode";
import { openPath, taskRows } from "../src/pages/tasks";

function task(over: Partial<InteractiveTask>): InteractiveTask {
  return {
    id: "id",
    description: "JupyterLab (brave-azure-otter)",
    state: "STATE_RUNNING",
    startTime: 10,
    username: "alice",
    resourcePool: "default",
    exitStatus: "",
    slots: 1,
    priority: 42,
    serviceAddress: "",
    ...over,
  };
}

describe("the Tasks page", () => {
  it("lists every kind together, the newest first", () => {
    const rows = taskRows({
      notebooks: [task({ id: "nb", startTime: 30, serviceAddress: "/proxy/nb/" })],
      shells: [task({ id: "sh", startTime: 10 })],
      commands: [task({ id: "cmd", startTime: 20 })],
      tensorboards: [],
    });
    expect(rows.map((r) => [r.kind, r.id])).toEqual([
      ["notebooks", "nb"],
      ["commands", "cmd"],
      ["shells", "sh"],
    ]);
  });

  it("opens running notebooks and TensorBoards only, at their proxy path", () => {
    const [nb, queued, shell] = taskRows({
      notebooks: [
        task({ id: "nb", startTime: 3, serviceAddress: "/proxy/nb/" }),
        task({ id: "q", startTime: 2, state: "STATE_QUEUED", serviceAddress: "/proxy/q/" }),
      ],
      shells: [task({ id: "sh", startTime: 1, serviceAddress: "/proxy/sh/" })],
      commands: [],
      tensorboards: [],
    });
    expect(openPath(nb!)).toBe("/proxy/nb/");
    expect(openPath(queued!)).toBeNull();
    expect(openPath(shell!)).toBeNull();
  });

  it("reads the master's command, notebook and shell shapes", () => {
    const shell = decode(interactiveTask, { id: "s", state: "STATE_QUEUED", username: "bob", private_key: "" });
    expect(shell.slots).toBe(0);
    expect(shell.serviceAddress).toBe("");
  });
});
