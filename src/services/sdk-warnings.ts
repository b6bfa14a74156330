import type { SharedV3Warning } from '@ai-sdk/provider';

const FIRST_WARNING_INFO =
  'AI SDK Warning System: To turn off warning logging, set the AI_SDK_LOG_WARNINGS global to false.';
let infoLogged = false;

/**
 * A model step's provider warnings (its `stream-start` part's), logged as `streamText` logs them
 * when the step ends (the SDK's logger is not exported): to the `AI_SDK_LOG_WARNINGS` function
 * when one is set, nowhere when it is `false`, else to the console in the SDK's words.
 */
export function logWarnings(warnings: SharedV3Warning[], model: { provider: string; modelId: string }): void {
  if (warnings.length === 0) return;
  const logger = globalThis.AI_SDK_LOG_WARNINGS;
  if (logger === false) return;
  if (typeof logger === 'function') {
    logger({ warnings, provider: model.provider, model: model.modelId });
    return;
  }
  if (!infoLogged) {
    infoLogged = true;
    console.info(FIRST_WARNING_INFO);
  }
  for (const warning of warnings) {
    console.warn(`AI SDK Warning (${model.provider} / ${model.modelId}): ${described(warning)}`);
  }
}

function described(warning: SharedV3Warning): string {
  switch (warning.type) {
    case 'unsupported':
    case 'compatibility': {
      const how = warning.type === 'unsupported' ? 'is not supported' : 'is used in a compatibility mode';
      return `The feature "${warning.feature}" ${how}.${warning.details ? ` ${warning.details}` : ''}`;
    }
    case 'other':
      return warning.message;
    default:
      return JSON.stringify(warning, null, 2);
  }
}
