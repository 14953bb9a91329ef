import { hash } from 'node:crypto';

const MASK_64 = (1n << 64n) - 1n;

/**
 * An order-independent fingerprint of a set of rows: how many, and the sum mod 2^64 of the first 64 bits of each
 * canonical row's SHA-256. Two sides read in any order, or in pages, agree exactly when (but for a 2^-64 chance)
 * they hold the same rows; unlike XOR, a sum does not cancel a row counted twice.
 */
export class SetDigest {
  #count = 0;
  #sum = 0n;

  add(canonicalRow: string): void {
    this.#count += 1;
    this.#sum = (this.#sum + BigInt(`0x${hash('sha256', canonicalRow, 'hex').slice(0, 16)}`)) & MASK_64;
  }

  get count(): number {
    return this.#count;
  }

  /** The sum as 16 hex digits. */
  get checksum(): string {
    return this.#sum.toString(16).padStart(16, '0');
  }

  equals(other: SetDigest): boolean {
    return this.#count === other.#count && this.#sum === other.#sum;
  }
}
