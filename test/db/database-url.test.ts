import { describe, expect, it } from 'vitest';
import { parseHostList } from '../../src/config/database-url.js';
import { loadConfig } from '../../src/config.js';
import { redactUrl } from '../../src/startup-errors.js';

describe('a database URL with several hosts', () => {
  it('leaves a one-host URL as it is', () => {
    const url = 'postgres://baton:secret@db.example.com:6543/baton?sslmode=require';
    const list = parseHostList(url);
    expect(list.url).toBe(url);
    expect(list.hosts).toEqual([{ host: 'db.example.com', port: 6543 }]);
    expect(list.target).toBe('any');
  });

  it('splits the hosts off, gives node-postgres the first, and keeps the other parameters', () => {
    const list = parseHostList(
      'postgresql://baton:secret@10.0.0.1:5432,10.0.0.2,[fd00::3]:5433/jobs?sslmode=require&target_session_attrs=read-write',
    );
    expect(list.hosts).toEqual([
      { host: '10.0.0.1', port: 5432 },
      { host: '10.0.0.2', port: 5432 },
      { host: 'fd00::3', port: 5433 },
    ]);
    expect(list.target).toBe('read-write');
    expect(list.url).toBe('postgresql://baton:secret@10.0.0.1:5432/jobs?sslmode=require');
    expect(list.urlOf(list.hosts[2]!)).toBe('postgresql://baton:secret@[fd00::3]:5433/jobs?sslmode=require');
  });

  it('refuses several hosts without read-write targeting, and targets it cannot use', () => {
    expect(() => parseHostList('postgres://a:5432,b:5432/baton')).toThrow(/target_session_attrs=read-write/);
    expect(() => parseHostList('postgres://a,b/baton?target_session_attrs=standby')).toThrow(
      /target_session_attrs=standby is not one Baton can use/,
    );
    expect(() => parseHostList('postgres://a:99999,b/baton?target_session_attrs=read-write')).toThrow(
      /no valid port/,
    );
  });

  it('is accepted as DATABASE_URL, and a bad one is refused at start-up naming the variable', () => {
    const url = 'postgres://baton@a:5432,b:5432/baton?target_session_attrs=primary';
    expect(loadConfig({ DATABASE_URL: url }).databaseUrl).toBe(url);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://a:5432,b:5432/baton' })).toThrow(/DATABASE_URL/);
  });

  it('is shown without its password', () => {
    expect(redactUrl('postgres://baton:secret@a:5432,b:5432/baton?target_session_attrs=read-write')).toBe(
      'postgres://baton:***@a:5432,b:5432/baton?target_session_attrs=read-write',
    );
    expect(redactUrl('postgres://baton:secret@db:5432/baton')).toBe('postgres://baton:***@db:5432/baton');
  });
});
