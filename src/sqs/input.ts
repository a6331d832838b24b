import { isPrintable } from '../jobs/limits.js';
import { invalidValue, missingParameter, SqsError } from './errors.js';

/**
 * Readers for an action's input, which is the same object whichever protocol carried it (the query
 * protocol's form is reshaped into the JSON protocol's object by query.ts). Each reader either
 * returns a value of the right type or throws the SQS error a real queue would answer.
 */
export type Input = Record<string, unknown>;

export function asInput(value: unknown, parameter: string): Input {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SqsError('InvalidParameterValue', `${parameter} must be an object`);
  }
  return value as Input;
}

/** A string that must be there and not be empty (SQS treats an empty string as missing). */
export function requiredString(input: Input, name: string): string {
  const value = input[name];
  if (value === undefined || value === null || value === '') throw missingParameter(name);
  if (typeof value !== 'string') throw invalidValue(name, value, 'must be a string.');
  return value;
}

export function optionalString(input: Input, name: string): string | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalidValue(name, value, 'must be a string.');
  return value;
}

/**
 * An optional string that reaches SQL as text (a filter such as QueueNamePrefix): PostgreSQL refuses
 * a NUL in text, so control characters and unpaired surrogates are refused here, naming the parameter.
 */
export function optionalText(input: Input, name: string): string | undefined {
  const value = optionalString(input, name);
  if (value !== undefined && !isPrintable(value)) throw invalidValue(name, value, NOT_PRINTABLE);
  return value;
}

export const NOT_PRINTABLE = 'must not contain control characters or unpaired UTF-16 surrogates.';

/** An integer within [min, max], or undefined when absent. */
export function optionalInt(input: Input, name: string, min: number, max: number): number | undefined {
  const value = input[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidValue(name, value, `Must be between ${min} and ${max}, if provided.`);
  }
  return value;
}

export function requiredInt(input: Input, name: string, min: number, max: number): number {
  if (input[name] === undefined || input[name] === null) throw missingParameter(name);
  return optionalInt(input, name, min, max)!;
}

/** A list of strings (empty when absent). */
export function stringList(input: Input, name: string): string[] {
  const value = input[name];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw invalidValue(name, value, 'must be a list of strings.');
  }
  return value as string[];
}

/** A map of strings to strings (empty when absent). */
export function stringMap(input: Input, name: string): Record<string, string> {
  const value = input[name];
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalidValue(name, value, 'must be a map of names to strings.');
  }
  // No prototype: a client's key "__proto__" stays an ordinary key.
  const out: Record<string, string> = Object.create(null);
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw invalidValue(`${name}.${key}`, v, 'must be a string.');
    out[key] = v;
  }
  return out;
}

/** A list of objects (the entries of a batch); absent is an empty list. */
export function objectList(input: Input, name: string): Input[] {
  const value = input[name];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalidValue(name, value, 'must be a list.');
  return value.map((item, i) => asInput(item, `${name}.${i + 1}`));
}
