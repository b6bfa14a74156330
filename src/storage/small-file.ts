import fs from 'node:fs';

/**
 * Writes `text` to `file` (created or emptied) through one descriptor: open, write, fsync when
 * `durable`, close. Four hops to the thread pool at most, in the callback forms the store's hot
 * paths use; `fs.promises.writeFile` takes more, and cannot fsync.
 */
export async function writeSmallFile(file: string, text: string, durable: boolean): Promise<void> {
  const fd = await new Promise<number>((resolve, reject) =>
    fs.open(file, 'w', 0o600, (error, opened) => (error ? reject(error) : resolve(opened))),
  );
  try {
    await new Promise<void>((resolve, reject) =>
      fs.writeFile(fd, text, (error) => (error ? reject(error) : resolve())),
    );
    if (durable) {
      await new Promise<void>((resolve, reject) =>
        fs.fsync(fd, (error) => (error ? reject(error) : resolve())),
      );
    }
  } catch (error) {
    await new Promise<void>((resolve) => fs.close(fd, () => resolve()));
    throw error;
  }
  // Not durable, a failed close may be the only report of a failed write (NFS): it is thrown.
  await new Promise<void>((resolve, reject) => fs.close(fd, (error) => (error ? reject(error) : resolve())));
}
