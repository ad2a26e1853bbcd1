import { defineConfig } from 'vite';

// The page is served from /console/ by the server: relative asset URLs, one
// hashed bundle, nothing fetched from elsewhere at run time.
export default defineConfig({
  base: './',
  resolve: { conditions: ['@trace-ingest/source'] },
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 400 },
});
