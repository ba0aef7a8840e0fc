import { defineConfig } from "vitest/config";

// The master serves dist/ itself; `npm run dev` proxies the API to a master on :8080.
export default defineConfig({
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 600 },
  server: { proxy: { "/api": "http://localhost:8080" } },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
