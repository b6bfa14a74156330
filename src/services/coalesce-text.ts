import type { TextStreamPart, ToolSet } from 'ai';

type Part = TextStreamPart<ToolSet>;
type TextDelta = Extract<Part, { type: 'text-delta' }>;

/**
 * A `streamText` transform (`experimental_transform`) that joins the text deltas of one part
 * reaching it in the same turn of the event loop: the first leaves at once (a token arriving
 * alone is not held back), the rest of the turn's follow as one delta when the turn ends, or
 * before the next part of another kind. Everything after it in the AI SDK (its output and event
 * stages, the UI message stream, Atrium's SSE writer) then handles a provider's burst as a few
 * chunks instead of one per token. Order and text are unchanged.
 */
export function coalesceTextDeltas(): TransformStream<Part, Part> {
  let held: TextDelta | undefined;
  /** Set while a delta of this turn has already left: later ones are held until the turn ends. */
  let turnBusy = false;
  let controllerRef: TransformStreamDefaultController<Part> | undefined;
  const release = () => {
    if (held && controllerRef) controllerRef.enqueue(held);
    held = undefined;
  };
  const endTurn = () => {
    turnBusy = false;
    try {
      release();
    } catch {
      // The stream was cancelled meanwhile: nothing is reading any more.
    }
  };
  return new TransformStream<Part, Part>({
    start(controller) {
      controllerRef = controller;
    },
    transform(part, controller) {
      if (part.type !== 'text-delta' || part.providerMetadata !== undefined) {
        release();
        controller.enqueue(part);
        return;
      }
      if (!turnBusy) {
        turnBusy = true;
        setImmediate(endTurn);
        release();
        controller.enqueue(part);
      } else if (held && held.id === part.id) {
        held.text += part.text;
      } else {
        release();
        held = { ...part };
      }
    },
    flush() {
      release();
    },
  });
}
