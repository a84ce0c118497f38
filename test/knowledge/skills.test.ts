// Skills on a real filesystem: discovery, bad SKILL.md files skipped with their reason, loading, and doctor's check.
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, realpath, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { skillsCheck } from '../../src/cli/doctor-checks.js';
import { configFilePaths, userConfigDir } from '../../src/config/config.js';
import { ToolError } from '../../src/protocol/errors.js';
import {
  discoverSkills, findSkill, loadedSkillText, loadSkill, MAX_SKILL_FILES, parseSkill, skillIndexText, type SkillInfo,
} from '../../src/knowledge/skills.js';

let tmp: string;
let workspace: string;
let user: string;
let projectSkills: string;
let userSkills: string;

beforeEach(async () => {
  tmp = await realpath(await mkdtemp(join(tmpdir(), 'actorloop-skills-')));
  workspace = join(tmp, 'ws');
  user = join(tmp, 'config', 'actorloop');
  projectSkills = join(workspace, '.agents', 'skills');
  userSkills = join(user, 'skills');
  await mkdir(projectSkills, { recursive: true });
  await mkdir(userSkills, { recursive: true });
});

afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function put(path: string, text: string | Buffer): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, text);
}

function skillMd(name: string, description: string, body = `Do ${name}.\n`): string {
  return `---\nname: ${name}\ndescription: ${description}\n---\n${body}`;
}

describe('parseSkill', () => {
  it('reads name, description and body, with quoted and folded descriptions, CRLF and a BOM', () => {
    expect(parseSkill('---\nname: pdf\ndescription: Fill PDF forms.\nlicense: MIT\n---\n\n# PDF\nSteps.\n'))
      .toEqual({ name: 'pdf', description: 'Fill PDF forms.', body: '# PDF\nSteps.\n' });
    expect(parseSkill('---\nname: a-1\ndescription: >\n  Folded over\n  two lines.\n---\nbody'))
      .toEqual({ name: 'a-1', description: 'Folded over two lines.\n', body: 'body' });
    expect(parseSkill('\uFEFF---\r\nname: x\r\ndescription: "Quoted: with a colon"\r\n---\r\nbody\r\n'))
      .toEqual({ name: 'x', description: 'Quoted: with a colon', body: 'body\r\n' });
    expect(parseSkill('---\nname: only\ndescription: front matter\n---')).toEqual({ name: 'only', description: 'front matter', body: '' });
  });

  it('says what is wrong with front matter that is missing, unclosed, malformed or breaks the name rules', () => {
    const cases: Array<[string, RegExp]> = [
      ['# Just markdown\n', /no front matter/],
      ['---\nname: x\ndescription: y\n', /not closed/],
      ['---\n---\nbody', /empty/],
      ['---\n- a\n- b\n---\n', /not a mapping/],
      ['---\nname: [unclosed\n---\n', /not valid YAML/],
      ['---\nname: a\nname: b\ndescription: d\n---\n', /not valid YAML: Map keys must be unique/],
      ['---\ndescription: d\n---\n', /no `name`/],
      ['---\nname: 12\ndescription: d\n---\n', /`name` is not a string/],
      ['---\nname: My_Skill\ndescription: d\n---\n', /may hold only lowercase letters, digits and single hyphens/],
      ['---\nname: -lead\ndescription: d\n---\n', /single hyphens/],
      ['---\nname: a--b\ndescription: d\n---\n', /single hyphens/],
      [`---\nname: ${'a'.repeat(65)}\ndescription: d\n---\n`, /65 characters, over 64/],
      ['---\nname: a\n---\n', /no `description`/],
      ['---\nname: a\ndescription: ""\n---\n', /`description` is empty/],
      ['---\nname: a\ndescription: [1, 2]\n---\n', /`description` is not a string/],
      [`---\nname: a\ndescription: ${'d'.repeat(1025)}\n---\n`, /1025 characters, over 1024/],
    ];
    for (const [text, reason] of cases) {
      const parsed = parseSkill(text);
      expect(parsed, text).toHaveProperty('error');
      expect((parsed as { error: string }).error, text).toMatch(reason);
    }
    expect(parseSkill(`---\nname: ${'a'.repeat(64)}\ndescription: ${'d'.repeat(1024)}\n---\n`)).not.toHaveProperty('error');
  });

  it('refuses an alias bomb instead of expanding it', () => {
    const bomb = ['---', 'a: &a ["x","x","x","x","x","x","x","x","x"]', 'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
      'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]', 'name: *c', 'description: d', '---', ''].join('\n');
    expect(parseSkill(bomb)).toEqual({ error: expect.stringMatching(/not valid YAML/) });
  });
});

describe('discoverSkills', () => {
  it('finds project and user skills, sorted by name, a project skill winning over a user one of the same name', async () => {
    await put(join(projectSkills, 'shared', 'SKILL.md'), skillMd('shared', 'The project version.'));
    await put(join(projectSkills, 'build', 'SKILL.md'), skillMd('build', 'Builds the project.'));
    await put(join(userSkills, 'shared', 'SKILL.md'), skillMd('shared', 'The user version.'));
    await put(join(userSkills, 'review', 'SKILL.md'), skillMd('review', 'Reviews a diff.'));
    // not skill directories: files and dot entries in a skills root are ignored
    await put(join(projectSkills, 'README.md'), 'notes\n');
    await put(join(projectSkills, '.cache', 'SKILL.md'), 'junk');
    const { skills, skipped } = await discoverSkills({ workspace, userConfigDir: user });
    expect(skipped).toEqual([]);
    expect(skills.map((s) => [s.name, s.scope, s.description])).toEqual([
      ['build', 'project', 'Builds the project.'],
      ['review', 'user', 'Reviews a diff.'],
      ['shared', 'project', 'The project version.'],
    ]);
    const build = skills[0]!;
    expect(build).toMatchObject({ path: join(projectSkills, 'build', 'SKILL.md'), dir: join(projectSkills, 'build') });
    expect(build.digest).toBe(`sha256:${createHash('sha256').update(skillMd('build', 'Builds the project.')).digest('hex')}`);
    // no user dir, no skills dirs at all: nothing, and no complaint
    expect((await discoverSkills({ workspace, userConfigDir: null })).skills.map((s) => s.name)).toEqual(['build', 'shared']);
    expect(await discoverSkills({ workspace: join(tmp, 'empty'), userConfigDir: join(tmp, 'none') })).toEqual({ skills: [], skipped: [] });
  });

  it('skips each bad SKILL.md with its path and reason, keeping the good ones', async () => {
    await put(join(projectSkills, 'good', 'SKILL.md'), skillMd('good', 'Works.'));
    await put(join(projectSkills, 'plain', 'SKILL.md'), '# No front matter\n');
    await put(join(projectSkills, 'other', 'SKILL.md'), skillMd('another', 'Name unlike its directory.'));
    await put(join(projectSkills, 'huge', 'SKILL.md'), skillMd('huge', 'Too big.', 'x'.repeat(256 * 1024)));
    await put(join(projectSkills, 'binary', 'SKILL.md'), Buffer.from([0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0x00]));
    await mkdir(join(projectSkills, 'empty'));
    await mkdir(join(projectSkills, 'dir-md', 'SKILL.md'), { recursive: true });
    const { skills, skipped } = await discoverSkills({ workspace, userConfigDir: null });
    expect(skills.map((s) => s.name)).toEqual(['good']);
    expect(skipped).toEqual([
      { path: join(projectSkills, 'binary', 'SKILL.md'), reason: 'is not UTF-8 text' },
      { path: join(projectSkills, 'dir-md', 'SKILL.md'), reason: 'is a directory, not a regular file' },
      { path: join(projectSkills, 'empty', 'SKILL.md'), reason: 'is missing: a skill directory needs a SKILL.md' },
      { path: join(projectSkills, 'huge', 'SKILL.md'), reason: expect.stringMatching(/^is \d+ bytes, over the limit of 262144$/) },
      { path: join(projectSkills, 'other', 'SKILL.md'), reason: 'its name "another" is not its directory\'s name "other"' },
      { path: join(projectSkills, 'plain', 'SKILL.md'), reason: 'no front matter: the file must begin with a line `---`' },
    ]);
  });

  it('skips skill directories and SKILL.md files that link out of their skills root', async () => {
    await put(join(tmp, 'outside', 'away', 'SKILL.md'), skillMd('away', 'Lives outside.'));
    await symlink(join(tmp, 'outside', 'away'), join(projectSkills, 'away'));
    await mkdir(join(projectSkills, 'linked'));
    await put(join(tmp, 'outside', 'linked.md'), skillMd('linked', 'A SKILL.md from elsewhere.'));
    await symlink(join(tmp, 'outside', 'linked.md'), join(projectSkills, 'linked', 'SKILL.md'));
    // a symlink to a directory inside the root is followed
    await put(join(projectSkills, 'store', 'inner', 'SKILL.md'), skillMd('inner', 'Inside.'));
    await symlink(join(projectSkills, 'store', 'inner'), join(projectSkills, 'inner'));
    const { skills, skipped } = await discoverSkills({ workspace, userConfigDir: null });
    expect(skills.map((s) => s.name)).toEqual(['inner']);
    expect(skipped).toEqual([
      { path: join(projectSkills, 'away'), reason: `resolves to ${join(tmp, 'outside', 'away')}, outside its skills directory ${projectSkills}` },
      { path: join(projectSkills, 'linked', 'SKILL.md'), reason: `resolves to ${join(tmp, 'outside', 'linked.md')}, outside ${join(projectSkills, 'linked')}` },
      { path: join(projectSkills, 'store', 'SKILL.md'), reason: 'is missing: a skill directory needs a SKILL.md' },
    ]);
  });

  it('skips a project skills directory that links out of the workspace', async () => {
    await rm(join(workspace, '.agents'), { recursive: true });
    await put(join(tmp, 'foreign', 'skills', 'x', 'SKILL.md'), skillMd('x', 'Foreign.'));
    await mkdir(join(workspace, '.agents'));
    await symlink(join(tmp, 'foreign', 'skills'), projectSkills);
    const { skills, skipped } = await discoverSkills({ workspace, userConfigDir: null });
    expect(skills).toEqual([]);
    expect(skipped).toEqual([{ path: projectSkills, reason: `resolves to ${join(tmp, 'foreign', 'skills')}, outside the workspace ${workspace}` }]);
  });
});

describe('loadSkill', () => {
  async function only(): Promise<SkillInfo> {
    const { skills } = await discoverSkills({ workspace, userConfigDir: null });
    expect(skills).toHaveLength(1);
    return skills[0]!;
  }

  it('gives the body, the digest and the other files, sorted, without SKILL.md, dot files or links out', async () => {
    const dir = join(projectSkills, 'deploy');
    await put(join(dir, 'SKILL.md'), skillMd('deploy', 'Deploys.', '# Deploy\nRun scripts/go.sh.\n'));
    await put(join(dir, 'scripts', 'go.sh'), '#!/bin/sh\n');
    await put(join(dir, 'reference.md'), 'ref\n');
    await put(join(dir, 'a', 'b', 'deep.txt'), 'deep\n');
    await put(join(dir, '.hidden'), 'no\n');
    await put(join(tmp, 'secret.txt'), 'secret\n');
    await symlink(join(tmp, 'secret.txt'), join(dir, 'leak.txt'));
    await symlink(join(dir, 'reference.md'), join(dir, 'alias.md'));
    await symlink(tmp, join(dir, 'escape'));
    await symlink(dir, join(dir, 'loop'));
    const skill = await only();
    const loaded = await loadSkill(skill);
    expect(loaded).toEqual({
      body: '# Deploy\nRun scripts/go.sh.\n',
      digest: skill.digest,
      files: ['a/b/deep.txt', 'alias.md', 'reference.md', 'scripts/go.sh'],
      moreFiles: false,
    });
    const text = loadedSkillText(skill, loaded);
    expect(text).toBe([
      `Skill deploy (project skill in ${dir}):`, '', '# Deploy', 'Run scripts/go.sh.', '',
      `Other files of the skill (relative to ${dir}; read them with the usual tools when its instructions name them):`,
      '- a/b/deep.txt', '- alias.md', '- reference.md', '- scripts/go.sh',
    ].join('\n'));
    expect(loadedSkillText(skill, { body: 'b', files: [] })).toBe(`Skill deploy (project skill in ${dir}):\n\nb\n\nThe skill has no other files.`);
  });

  it(`lists at most ${MAX_SKILL_FILES} files and says there are more`, async () => {
    const dir = join(projectSkills, 'many');
    await put(join(dir, 'SKILL.md'), skillMd('many', 'Many files.'));
    await mkdir(join(dir, 'f'));
    for (let i = 0; i < MAX_SKILL_FILES + 5; i++) await writeFile(join(dir, 'f', `${String(i).padStart(3, '0')}.txt`), '');
    const loaded = await loadSkill(await only());
    expect(loaded.files).toHaveLength(MAX_SKILL_FILES);
    expect(loaded.files[0]).toBe('f/000.txt');
    expect(loaded.moreFiles).toBe(true);
    expect(loadedSkillText(await only(), loaded)).toContain('- ... (more files, not listed)');
  });

  it('reads the file again: an edit gives a new digest, a removal or a broken file a ToolError', async () => {
    const path = join(projectSkills, 'edit', 'SKILL.md');
    await put(path, skillMd('edit', 'Before.'));
    const skill = await only();
    await writeFile(path, skillMd('edit', 'After.', 'New body.\n'));
    const loaded = await loadSkill(skill);
    expect(loaded.body).toBe('New body.\n');
    expect(loaded.digest).not.toBe(skill.digest);
    await writeFile(path, 'no front matter now\n');
    await expect(loadSkill(skill)).rejects.toMatchObject({ code: 'skill.invalid', message: expect.stringContaining('no front matter') });
    await unlink(path);
    const err = await loadSkill(skill).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolError);
    expect(err).toMatchObject({ code: 'skill.unreadable', message: `skill edit: ${path} is gone` });
  });
});

describe('findSkill', () => {
  it('gives the named skill, and for an unknown name a ToolError listing the known ones', async () => {
    await put(join(projectSkills, 'zeta', 'SKILL.md'), skillMd('zeta', 'Z.'));
    await put(join(userSkills, 'alpha', 'SKILL.md'), skillMd('alpha', 'A.'));
    const { skills } = await discoverSkills({ workspace, userConfigDir: user });
    expect(findSkill(skills, 'zeta').scope).toBe('project');
    let err: unknown;
    try {
      findSkill(skills, 'nope');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ToolError);
    expect(err).toMatchObject({ code: 'skill.unknown', message: 'no skill named "nope"', hint: 'the skills are: alpha, zeta' });
    expect(() => findSkill([], 'x')).toThrow(expect.objectContaining({ hint: 'this workspace has no skills' }));
  });
});

describe('skillIndexText', () => {
  const info = (name: string, description: string): SkillInfo => ({
    name, description, path: `/s/${name}/SKILL.md`, dir: `/s/${name}`, scope: 'project', digest: 'sha256:0',
  });

  it('is one line per skill by name, after a sentence naming load_skill, whatever the order given', () => {
    const expected = [
      'Skills: instructions for particular kinds of task. When a task matches a skill\'s description, call the tool `load_skill` with its name and follow what it says before doing the task.',
      '- alpha: First one.',
      '- beta: Folded over two lines.',
    ].join('\n');
    expect(skillIndexText([info('beta', 'Folded over\n  two lines.\n'), info('alpha', 'First one.')])).toBe(expected);
    expect(skillIndexText([info('alpha', 'First one.'), info('beta', 'Folded over two lines.')])).toBe(expected);
    expect(skillIndexText([info('x', 'bell\u0007 and\ttab')])).toContain('- x: bell and tab');
  });

  it('is empty when there are no skills', () => {
    expect(skillIndexText([])).toBe('');
  });
});

describe('doctor: the skills check', () => {
  it('counts the skills found and warns once per skipped SKILL.md with its path and reason, never failing', async () => {
    await put(join(projectSkills, 'good', 'SKILL.md'), skillMd('good', 'Works.'));
    await put(join(userSkills, 'mine', 'SKILL.md'), skillMd('mine', 'Mine.'));
    await put(join(projectSkills, 'bad', 'SKILL.md'), '# no front matter\n');
    await put(join(userSkills, 'Wrong', 'SKILL.md'), skillMd('Wrong', 'Upper case.'));
    const results = await skillsCheck(workspace, user);
    expect(results.map((r) => r.status)).toEqual(['ok', 'warning', 'warning']);
    expect(results[0]).toMatchObject({ check: 'skills', detail: `2 skills in ${projectSkills} and ${userSkills}: good, mine (user)` });
    expect(results[1]).toMatchObject({ check: 'skills', detail: `${join(userSkills, 'Wrong', 'SKILL.md')} skipped: \`name\` "Wrong" may hold only lowercase letters, digits and single hyphens inside it` });
    expect(results[2]).toMatchObject({ check: 'skills', detail: `${join(projectSkills, 'bad', 'SKILL.md')} skipped: no front matter: the file must begin with a line \`---\`` });
    expect(results[1]!.fix).toMatch(/front matter/);
  });

  it('is one ok line when there are no skills', async () => {
    expect(await skillsCheck(join(tmp, 'bare'), null)).toEqual([
      { check: 'skills', status: 'ok', detail: `no skills in ${join(tmp, 'bare', '.agents', 'skills')}`, fix: null },
    ]);
  });
});

describe('userConfigDir', () => {
  it('is $XDG_CONFIG_HOME/actorloop, else ~/.config/actorloop, where the user config file also lives', () => {
    expect(userConfigDir({ XDG_CONFIG_HOME: '/x', HOME: '/h' })).toBe('/x/actorloop');
    expect(userConfigDir({ XDG_CONFIG_HOME: '', HOME: '/h' })).toBe('/h/.config/actorloop');
    expect(configFilePaths('/w', { HOME: '/h' }).user).toBe('/h/.config/actorloop/config.toml');
  });
});
