// Bundle-time stand-in for zod's `locales` index inside the Lambda bundles (see esbuild-plugins.js): zod configures
// English error messages by default and vault-rollout selects no other locale, so the other ~60 (about 250 KB
// minified) stay out. `z.locales.en` keeps working; any other locale is undefined in the bundles.
export { default as en } from 'zod/v4/locales/en.js';
