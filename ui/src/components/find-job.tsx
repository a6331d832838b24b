import { useState } from 'preact/hooks';
import { href } from '../router.js';

/**
 * The header's "Find a job": a job id (digits) opens its page, whatever its queue or state; any other
 * text is a unique or idempotency key, looked up on the Jobs page (a key of digits only is found
 * there, with its own form). The job page answers "not found" for an id the key may not see, as
 * the API does.
 */
export function FindJob() {
  const [text, setText] = useState('');
  const value = text.trim();
  const valid = value.length > 0 && value.length <= 255;
  return (
    <form
      class="find-job"
      aria-label="Find a job"
      onSubmit={(event) => {
        event.preventDefault();
        if (!valid) return;
        location.hash = /^[0-9]{1,19}$/.test(value)
          ? href('/jobs', value)
          : `${href('/jobs')}?${new URLSearchParams({ show: 'key', key: value })}`;
        setText('');
      }}
    >
      <label>
        <span class="visually-hidden">Find a job by id or key</span>
        <input
          class="find-job-id"
          type="search"
          placeholder="Job id or key"
          value={text}
          onInput={(event) => setText((event.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" disabled={!valid}>
        Find
      </button>
    </form>
  );
}
