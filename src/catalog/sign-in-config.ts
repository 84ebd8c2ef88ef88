/**
 * How the catalog signs a visitor in: the body of `GET /ui/config.json` (`{"signIn": SignInConfig}`), which the
 * registry writes (catalog-sign-in.ts) and the browser app reads (ui/src/sign-in.ts). One definition for both
 * sides: this file imports nothing, so the app's type check (ui/tsconfig.json, browser types only) can read it,
 * and the app imports it as a type only, so nothing of it reaches the bundle.
 */
export type SignInConfig =
  | { readonly kind: "local" }
  | {
      readonly kind: "oidc";
      readonly issuer: string;
      readonly clientId: string;
      readonly scope: string;
      readonly resource?: string;
      readonly allowHttp: boolean;
    }
  | { readonly kind: "none"; readonly reason: string };
