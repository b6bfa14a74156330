import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { validateDownloadUrl } from '@ai-sdk/provider-utils';
import { Agent, fetch as undiciFetch } from 'undici';

/**
 * Which MCP servers an agent may reach. An agent of the setup file is the operator's: its
 * servers may be anywhere, an internal network included. An agent made over the API is a
 * tenant's (a workspace admin's): unless the operator allows it
 * (`ATRIUM_MCP_ALLOW_PRIVATE_NETWORK`), its servers must be public, or a tenant could make
 * Atrium call the operator's internal services (cloud metadata, admin ports) with headers of
 * its choosing and read their errors back in `warnings`. Public means what the AI SDK's own
 * downloads allow: no private, loopback, link-local, shared or reserved address, by name
 * (`localhost`, `*.internal`), by literal, or after DNS resolution (checked when connecting, so a
 * name that resolves elsewhere later cannot slip through).
 */
export type McpReach = 'any' | 'public';

/** Why `url` is not a public address (its literal host), or undefined when it may be. */
export function privateAddressProblem(url: string): string | undefined {
  try {
    validateDownloadUrl(url);
    return undefined;
  } catch {
    return 'is a private, loopback or link-local address (or names one)';
  }
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;
type Lookup = (hostname: string, options: { all?: boolean }, callback: LookupCallback) => void;

/** A DNS lookup that fails when any address the name resolves to is not public. */
export function publicOnlyLookup(lookup: Lookup = dnsLookup as unknown as Lookup): Lookup {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, []);
      const addresses = found as LookupAddress[];
      const unsafe = addresses.find(({ address, family }) =>
        privateAddressProblem(`http://${family === 6 ? `[${address}]` : address}/`),
      );
      if (addresses.length === 0 || unsafe) {
        const refused: NodeJS.ErrnoException = new Error(
          `${hostname} resolves to an address that is not public${unsafe ? ` (${unsafe.address})` : ''}`,
        );
        refused.code = 'EADDRNOTPUBLIC';
        return callback(refused, []);
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

let publicDispatcher: Agent | undefined;

/** `fetch` that connects to public addresses only (publicOnlyLookup on every connection). */
export const publicOnlyFetch: typeof fetch = (input, init) => {
  publicDispatcher ??= new Agent({ connect: { lookup: publicOnlyLookup() as never } });
  return undiciFetch(input as never, { ...(init as object), dispatcher: publicDispatcher }) as never;
};
