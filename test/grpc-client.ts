import * as grpc from '@grpc/grpc-js';
import { traceServiceDefinition } from '@trace-ingest/server/otlp-grpc';

/** One raw TraceService/Export call (bytes in, bytes out) with the given metadata and channel options; resolves with its error or answer. */
export function exportCall(
  target: string,
  path: string,
  body: Buffer,
  metadata: Record<string, string>,
  options: grpc.ClientOptions = {},
): Promise<{ error?: grpc.ServiceError; response?: Buffer }> {
  const Client = grpc.makeGenericClientConstructor(traceServiceDefinition(path), 'TraceService');
  const client = new Client(target, grpc.credentials.createInsecure(), options);
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  const call = client as unknown as { Export: (b: Buffer, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, r?: Buffer) => void) => void };
  return new Promise((resolve) => {
    call.Export(body, md, (error, response) => {
      client.close();
      resolve(error === null ? { response } : { error });
    });
  });
}
