/** The shapes the catalog reads from the REST API (docs/contract.md); only what it shows. */

export interface Reference {
  readonly id: string;
  readonly descriptor?: string;
  readonly href?: string;
  readonly reference_id?: string;
}

export interface MimeType {
  readonly type?: string;
}

export interface Skill {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly tags?: readonly { readonly tag: string }[];
  readonly inputModes?: readonly MimeType[];
  readonly outputModes?: readonly MimeType[];
}

export interface HostResource {
  readonly tool_name: string;
  readonly description?: string;
  readonly agent_resource?: { readonly id?: string; readonly descriptor?: string; readonly type?: string };
  readonly tools?: readonly { readonly id: string; readonly descriptor?: string }[];
}

export interface SkillResource {
  readonly skillId?: string;
  readonly executionMode?: Reference;
  readonly hostResources?: readonly HostResource[];
}

export interface Meta {
  readonly createdAt?: string;
  readonly updatedAt?: string;
  readonly statusChangedAt?: string;
  readonly revision?: number;
  readonly status?: string;
  readonly statusMessage?: string;
  readonly latest?: boolean;
  readonly etag?: string;
}

export interface Definition {
  readonly id: string;
  readonly reference_id?: string;
  readonly name: string;
  readonly description: string;
  readonly url: string;
  readonly version: string;
  readonly provider?: Reference;
  readonly platform?: Reference;
  readonly skills?: readonly Skill[];
  readonly capabilities?: Readonly<Record<string, boolean>>;
  readonly overview?: string;
  readonly iconUrl?: string;
  readonly documentationUrl?: string;
  readonly externalAgentID?: string;
  readonly externalTenantID?: string;
  readonly defaultInputModes?: readonly MimeType[];
  readonly defaultOutputModes?: readonly MimeType[];
  readonly supportsAuthenticatedExtendedCard?: boolean;
  readonly hostConfig?: readonly SkillResource[];
  readonly meta?: Meta;
}

export interface DefinitionPage {
  readonly total: number;
  readonly data: readonly Definition[];
  readonly nextPageToken?: string;
}

export type AgentCard = Readonly<Record<string, unknown>>;
