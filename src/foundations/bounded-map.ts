// A Map that holds at most `limit` entries: adding a key beyond it drops the oldest one.
// Oldest first out rather than least recently used: cheaper on every hit (no reordering), and
// an entry that falls out costs one more database read or decryption. A limit of 0 keeps
// nothing.
export class BoundedMap<K, V> extends Map<K, V> {
  constructor(private readonly limit: number) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.limit <= 0) return this;
    if (this.size >= this.limit && !this.has(key)) this.delete(this.keys().next().value as K);
    return super.set(key, value);
  }
}
