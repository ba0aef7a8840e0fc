import { defineConfig } from "vitest/config";

// The build goes into the master's package (master/gateway/webui, git-ignored), which ships
// it in the wheel; `npm run dev` proxies the API to a master on :8080.
export default defineConfig({
  build: {
    outDir: "../master/gateway/webui",
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 600,
  },
  server: { proxy: { "/api": "http://localhost:8080" } },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
