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
    start_time: 10,
    username: "alice",
    resource_pool: "default",
    exit_status: "",
    slots: 1,
    priority: 42,
    service_address: "",
    ...over,
  };
}

describe("the Tasks page", () => {
  it("lists every kind together, the newest first", () => {
    const rows = taskRows({
      notebooks: [task({ id: "nb", start_time: 30, service_address: "/proxy/nb/" })],
      shells: [task({ id: "sh", start_time: 10 })],
      commands: [task({ id: "cmd", start_time: 20 })],
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
        task({ id: "nb", start_time: 3, service_address: "/proxy/nb/" }),
        task({ id: "q", start_time: 2, state: "STATE_QUEUED", service_address: "/proxy/q/" }),
      ],
      shells: [task({ id: "sh", start_time: 1, service_address: "/proxy/sh/" })],
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
    expect(shell.service_address).toBe("");
  });
});
