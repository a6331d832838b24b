import { useState } from 'preact/hooks';
import { href } from '../router.js';

/**
 * The header's "Find a job": a job id (digits) opens its page, whatever its queue or state; the job
 * page answers "not found" for an id the key may not see, as the API does.
 */
export function FindJob() {
  const [id, setId] = useState('');
  const valid = /^[0-9]{1,19}$/.test(id.trim());
  return (
    <form
      class="find-job"
      aria-label="Find a job"
      onSubmit={(event) => {
        event.preventDefault();
        if (!valid) return;
        location.hash = href('/jobs', id.trim());
        setId('');
      }}
    >
      <label>
        <span class="visually-hidden">Find a job by id</span>
        <input
          class="find-job-id"
          type="search"
          inputMode="numeric"
          placeholder="Job id"
          value={id}
          onInput={(event) => setId((event.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" disabled={!valid}>
        Find
      </button>
    </form>
  );
}
