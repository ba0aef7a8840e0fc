// The WebUI's entry: the frame (navigation, live indicator) and the routes.

import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { clusterPage } from "./pages/cluster";
import { experimentPage } from "./pages/experiment";
import { experimentsPage } from "./pages/experiments";
import { jobsPage } from "./pages/jobs";
import { trialPage } from "./pages/trial";
import { lazy, type Page, type Route, Router } from "./router";

// The YAML library is the biggest dependency and only these pages edit YAML: they load
// when first visited (one more round trip), everything else is in the first bundle.
const forkPage = lazy(() => import("./pages/create").then((m) => m.forkPage));
const continuePage = lazy(() => import("./pages/create").then((m) => m.continuePage));
import { h, link, replace } from "./ui/dom";

const routes: Route[] = [
  { pattern: "/", page: (_r, _p, ctx) => (ctx.navigate("/experiments"), () => {}) },
  { pattern: "/cluster", page: clusterPage, nav: "cluster" },
  { pattern: "/experiments", page: experimentsPage, nav: "experiments" },
  { pattern: "/experiments/:id/fork", page: forkPage, nav: "experiments" },
  { pattern: "/experiments/:id", page: experimentPage, nav: "experiments" },
  { pattern: "/trials/:id/continue", page: continuePage, nav: "experiments" },
  { pattern: "/trials/:id", page: trialPage, nav: "experiments" },
  { pattern: "/jobs", page: jobsPage, nav: "jobs" },
];

const notFound: Page = (root) => {
  replace(root, h("div", { class: "page-head" }, h("h1", {}, "Not found")), h("p", {}, "No page at ", h("code", {}, location.pathname), ". ", link("/experiments", "Go to the experiments.")));
  return () => {};
};

const NAV: [string, string, string][] = [
  ["experiments", "/experiments", "Experiments"],
  ["jobs", "/jobs", "Job queue"],
  ["cluster", "/cluster", "Cluster"],
];

const navLinks = NAV.map(([key, href, label]) => {
  const a = link(href, label);
  a.dataset.nav = key;
  return a;
});
const liveDot = h("span", { class: "live idle", title: "live updates from the master" });
const main = h("main", { id: "page" });
const app = document.getElementById("app") as HTMLElement;
replace(app, h("header", { class: "top" }, link("/experiments", h("strong", { class: "brand" }, "pydet")), h("nav", {}, ...navLinks), h("span", { class: "spacer" }), liveDot), main);

const router = new Router(
  routes,
  main,
  notFound,
  (route) => {
    for (const a of navLinks) a.classList.toggle("active", a.dataset.nav === route?.nav);
    // Pages without a live stream poll instead; the indicator stays blank for them.
    liveDot.className = "live idle";
    liveDot.textContent = "";
    document.title = `pydet · ${route?.nav ?? "not found"}`;
  },
  (live) => {
    liveDot.className = live ? "live on" : "live";
    liveDot.textContent = live ? "live" : "offline";
  },
);
router.render();
