import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { type FormEvent, useEffect, useMemo, useState } from 'react';
import { createRoot } from 'react-dom/client';

/**
 * A browser app that talks to Atrium directly (CORS), with the AI SDK's own useChat. Settings come
 * from the page URL: ?api=http://127.0.0.1:3000&key=atr_…&agent=agt_…[&chat=<chat id>].
 */
const params = new URLSearchParams(location.search);
const api = params.get('api') ?? 'http://127.0.0.1:3000';
const key = params.get('key') ?? '';
const agentId = params.get('agent') ?? '';
const headers = { 'x-service-api-key': key };

/** The chat this page holds: from the URL, else a new client id (useChat's own kind of id). */
function chatIdOfPage(): string {
  const given = params.get('chat');
  if (given) return given;
  const id = `web_${crypto.randomUUID().replaceAll('-', '')}`;
  params.set('chat', id);
  history.replaceState(null, '', `?${params}`);
  return id;
}

function Chat({ id, initialMessages }: { id: string; initialMessages: UIMessage[] }) {
  const transport = useMemo(
    () =>
      new DefaultChatTransport<UIMessage>({
        api: `${api}/v1/chat`,
        headers,
        // The server holds the history: the last message is enough (regenerate sends none new).
        prepareSendMessagesRequest: ({ id: chatId, messages, trigger, messageId }) => ({
          body: { agentId, stream: true, id: chatId, trigger, messageId, messages: messages.slice(-1) },
        }),
      }),
    [],
  );
  // resume: a reply still being generated (after a reload or a dropped connection) is replayed.
  const { messages, sendMessage, regenerate, status, error } = useChat({
    id,
    messages: initialMessages,
    transport,
    resume: true,
  });
  const [input, setInput] = useState('');

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!input.trim()) return;
    void sendMessage({ text: input });
    setInput('');
  };
  // Stop on the server: the provider call is aborted and the stream ends with what was shown.
  const stop = () => fetch(`${api}/v1/chat/${id}/stop`, { method: 'POST', headers });

  return (
    <main>
      <div data-testid="status">{status}</div>
      {messages.map((message) => (
        <div key={message.id} className={`message ${message.role}`} data-testid={`message-${message.role}`}>
          {message.parts.map((part) => (part.type === 'text' ? part.text : '')).join('')}
        </div>
      ))}
      {error && (
        <div className="error" data-testid="error">
          {error.message}
        </div>
      )}
      <form onSubmit={submit}>
        <input data-testid="input" value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" data-testid="send">
          Send
        </button>
        <button type="button" data-testid="stop" onClick={() => void stop()}>
          Stop
        </button>
        <button type="button" data-testid="regenerate" onClick={() => void regenerate()}>
          Regenerate
        </button>
      </form>
    </main>
  );
}

function App() {
  const id = useMemo(chatIdOfPage, []);
  const [initial, setInitial] = useState<UIMessage[] | undefined>(undefined);
  useEffect(() => {
    // A reload shows the history the server holds (404: a chat not created yet).
    fetch(`${api}/v1/chats/${id}/messages`, { headers })
      .then(async (res) => (res.ok ? ((await res.json()).data.messages as UIMessage[]) : []))
      .then(setInitial, () => setInitial([]));
  }, [id]);
  if (!initial) return <div data-testid="status">loading</div>;
  return <Chat id={id} initialMessages={initial} />;
}

createRoot(document.getElementById('root')!).render(<App />);
