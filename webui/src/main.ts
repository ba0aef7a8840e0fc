// The WebUI's entry: the frame (navigation, live indicator, who is logged in) and the routes.

import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { ApiError, api, errorMessage, whenDiskFull, whenUnauthenticated } from "./api/client";
import { clusterPage } from "./pages/cluster";
import { experimentPage } from "./pages/experiment";
import { experimentsPage } from "./pages/experiments";
import { jobsPage } from "./pages/jobs";
import { loginPage } from "./pages/login";
import { modelPage, modelsPage } from "./pages/models";
import { projectPage } from "./pages/project";
import { Sidebar } from "./pages/sidebar";
import { trialPage } from "./pages/trial";
import { lazy, type Page, type Route, Router } from "./router";
import { currentUser, LOGIN_PAGE, loginPath } from "./session";

// The YAML library is the biggest dependency and only these pages edit YAML: they load
// when first visited (one more round trip), everything else is in the first bundle.
const forkPage = lazy(() => import("./pages/create").then((m) => m.forkPage));
const continuePage = lazy(() => import("./pages/create").then((m) => m.continuePage));
import { button, h, link, replace } from "./ui/dom";

const sidebar = new Sidebar();

const routes: Route[] = [
  { pattern: "/", page: (_r, _p, ctx) => (ctx.navigate("/experiments"), () => {}) },
  { pattern: "/cluster", page: clusterPage, nav: "cluster" },
  { pattern: "/experiments", page: experimentsPage, nav: "experiments" },
  { pattern: "/experiments/:id/fork", page: forkPage, nav: "experiments" },
  { pattern: "/experiments/:id", page: experimentPage, nav: "experiments" },
  { pattern: "/trials/:id/continue", page: continuePage, nav: "experiments" },
  { pattern: "/trials/:id", page: trialPage, nav: "experiments" },
  { pattern: "/jobs", page: jobsPage, nav: "jobs" },
  { pattern: "/projects/:id", page: projectPage(() => void sidebar.refresh()), nav: "projects" },
  { pattern: "/models", page: modelsPage, nav: "models" },
  { pattern: "/models/:name", page: modelPage, nav: "models" },
  { pattern: "/tasks", page: lazy(() => import("./pages/tasks").then((m) => m.tasksPage)), nav: "tasks" },
  { pattern: LOGIN_PAGE, page: loginPage, nav: "login" },
];

const notFound: Page = (root) => {
  replace(root, h("div", { class: "page-head" }, h("h1", {}, "Not found")), h("p", {}, "No page at ", h("code", {}, location.pathname), ". ", link("/experiments", "Go to the experiments.")));
  return () => {};
};

const NAV: [string, string, string][] = [
  ["experiments", "/experiments", "Experiments"],
  ["models", "/models", "Model registry"],
  ["jobs", "/jobs", "Job queue"],
  ["tasks", "/tasks", "Tasks"],
  ["cluster", "/cluster", "Cluster"],
];

const navLinks = NAV.map(([key, href, label]) => {
  const a = link(href, label);
  a.dataset.nav = key;
  return a;
});
const liveDot = h("span", { class: "live idle", title: "live updates from the master" });
const nav = h("nav", {}, ...navLinks);
const userName = h("span", { class: "user-name" });
const logout = button("Log out", () => {
  logout.disabled = true;
  api.logout().then(
    () => {
      currentUser.set(null);
      router.navigate(LOGIN_PAGE);
    },
    (e: unknown) => {
      // A 401: the session was already over, and the login page is on its way.
      if (!(e instanceof ApiError && e.status === 401)) window.alert(`Could not log out: ${errorMessage(e)}`);
    },
  ).finally(() => {
    logout.disabled = false;
  });
}, "small logout");
const userBox = h("span", { class: "user" }, userName, logout);
const main = h("main", { id: "page" });
// The cluster-wide message (`det master cluster-message set`), read once a user is known.
const banner = h("div", { class: "cluster-message", role: "status" });
banner.hidden = true;
const app = document.getElementById("app") as HTMLElement;
replace(
  app,
  h("header", { class: "top" }, link("/experiments", h("strong", { class: "brand" }, "pydet")), nav, h("span", { class: "spacer" }), liveDot, userBox),
  banner,
  h("div", { class: "frame" }, sidebar.el, main),
);

currentUser.subscribe((user) => {
  userBox.hidden = user === null;
  userName.textContent = user ? user.username : "";
  userName.title = user?.admin ? `${user.username} (admin)` : "";
  sidebar.el.hidden = user === null;
  if (user === null) return;
  void sidebar.refresh();
  showClusterMessage();
});

/** The banner: the admins' cluster message, or the master's word that its disk is full. */
function showClusterMessage(): void {
  api.master().then(
    (m) => {
      banner.textContent = m.clusterMessage?.message ?? "";
      banner.hidden = m.clusterMessage === null;
    },
    () => {},
  );
}
// Read again when a change is refused for a full disk, and once a minute (it may clear).
whenDiskFull(showClusterMessage);
window.setInterval(() => {
  if (currentUser.get() !== null) showClusterMessage();
}, 60_000);

const router = new Router(
  routes,
  main,
  notFound,
  (route) => {
    for (const a of navLinks) a.classList.toggle("active", a.dataset.nav === route?.nav);
    nav.hidden = route?.page === loginPage;
    sidebar.el.hidden = route?.page === loginPage || currentUser.get() === null;
    sidebar.mark(location.pathname);
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
// A 401 from any call: the session is missing or over. Log in, then come back here.
whenUnauthenticated(() => {
  currentUser.set(null);
  if (location.pathname !== LOGIN_PAGE) router.navigate(loginPath(location.pathname + location.search + location.hash), true);
});
router.render();
// Who is logged in, for the header (a 401 here goes to the login page as any other).
api.me().then(
  (user) => currentUser.set(user),
  () => {},
);
