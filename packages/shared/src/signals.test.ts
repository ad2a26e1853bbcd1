import { describe, expect, it } from 'vitest';
import { SignalEvents, type ShutdownSignal } from './signals.js';

describe('SignalEvents', () => {
  const setup = () => {
    let now = 1000;
    const seen: string[] = [];
    const events = new SignalEvents(
      {
        first: (s) => seen.push(`first ${s}`),
        again: (s) => seen.push(`again ${s}`),
        copy: (s) => seen.push(`copy ${s}`),
      },
      500,
      () => now,
    );
    return { seen, at: (t: number, s: ShutdownSignal) => ((now = 1000 + t), events.receive(s)) };
  };

  it('takes the copies of one event (group and forwarded) as that event', () => {
    const { seen, at } = setup();
    at(0, 'SIGTERM');
    at(2, 'SIGTERM');
    at(30, 'SIGTERM');
    expect(seen).toEqual(['first SIGTERM', 'copy SIGTERM', 'copy SIGTERM']);
  });

  it('takes a signal after the window as a new event, every time', () => {
    const { seen, at } = setup();
    at(0, 'SIGINT');
    at(1, 'SIGINT');
    at(500, 'SIGINT');
    at(501, 'SIGINT');
    at(2000, 'SIGTERM');
    expect(seen).toEqual(['first SIGINT', 'copy SIGINT', 'again SIGINT', 'again SIGINT', 'again SIGTERM']);
  });
});
