/**
 * Provider names as spans send them (the GenAI conventions' ids, SDK and
 * gateway spellings), mapped to the price catalog's provider ids: one table,
 * read by the price engine, the row encoder and the audit.
 */

const PROVIDER_ALIASES: Record<string, string> = {
  x_ai: 'x-ai',
  xai: 'x-ai',
  'gcp.gen_ai': 'google',
  'gcp.gemini': 'google',
  // Vertex AI bills some models apart from the Gemini API: a `google-vertex` entry (an adoption) wins where there is one.
  'gcp.vertex_ai': 'google-vertex',
  vertex_ai: 'google-vertex',
  vertexai: 'google-vertex',
  gemini: 'google',
  google_genai: 'google',
  'azure.ai.inference': 'azure',
  'azure.ai.openai': 'azure',
  azure_openai: 'azure',
  'aws.bedrock': 'aws',
  bedrock: 'aws',
  bedrock_converse: 'aws',
  'amazon-bedrock': 'aws',
  amazon_bedrock: 'aws',
  aws_bedrock: 'aws',
  mistralai: 'mistral',
  mistral_ai: 'mistral',
  'meta-llama': 'meta',
};

/** Where a provider's models are looked up when the catalog has no entry of that provider (or of that model there). */
export const PROVIDER_FALLBACKS: Readonly<Record<string, string>> = { 'google-vertex': 'google' };

/** A span's provider as the catalog names it ('' when none was sent). */
export function normalizeProvider(p: string | undefined): string {
  if (p === undefined) return '';
  const lower = p.trim().toLowerCase();
  return PROVIDER_ALIASES[lower] ?? lower;
}
