// The experiment page's "TensorBoard" button: opens the user's running TensorBoard for the
// experiment, or starts one (a task on an agent) and opens it once it serves.

import { api, errorMessage } from "../api/client";
import type { Tensorboard } from "../api/types";
import { h } from "../ui/dom";

const START_TIMEOUT_MS = 180_000;
const POLL_MS = 1_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The user's live TensorBoard over exactly this experiment, if there is one. */
export function existing(list: Tensorboard[], username: string, experimentId: number): Tensorboard | undefined {
  return list.find(
    (t) =>
      t.username === username &&
      t.experimentIds.length === 1 &&
      t.experimentIds[0] === experimentId &&
      (t.state === "STATE_RUNNING" || t.state === "STATE_STARTING" || t.state === "STATE_QUEUED"),
  );
}

async function serving(experimentId: number): Promise<string> {
  const [me, list] = await Promise.all([api.me(), api.tensorboards()]);
  let tb =
    existing(list.tensorboards, me.username, experimentId) ??
    (await api.launchTensorboard({ experimentIds: [experimentId], trialIds: [] })).tensorboard;
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (tb.state !== "STATE_RUNNING") {
    if (tb.state === "STATE_TERMINATED") throw new Error(`TensorBoard ${tb.id} ended: ${tb.exitStatus}`);
    if (Date.now() > deadline) throw new Error(`TensorBoard ${tb.id} is still ${tb.state}; try again later`);
    await sleep(POLL_MS);
    tb = (await api.tensorboard(tb.id)).tensorboard;
  }
  return tb.serviceAddress;
}

export function tensorboardButton(experimentId: number, onError: (message: string) => void): HTMLElement {
  const b = h("button", { type: "button", class: "small", data: { action: "tensorboard" } }, "TensorBoard");
  b.addEventListener("click", () => {
    // Opened now, while the click allows a new window; pointed at TensorBoard once it serves.
    const win = window.open("", "_blank");
    b.disabled = true;
    b.textContent = "TensorBoard (starting…)";
    serving(experimentId)
      .then(
        (path) => {
          if (win) win.location.href = path;
          else window.location.assign(path);
        },
        (err: unknown) => {
          win?.close();
          onError(`Could not open TensorBoard: ${errorMessage(err)}`);
        },
      )
      .finally(() => {
        b.disabled = false;
        b.textContent = "TensorBoard";
      });
  });
  return b;
}
